"""generator.yamlio writes a document with libyaml's emitter only where it gives the same bytes as PyYAML's
Python emitter (the bundle's bytes must not depend on which one wrote them): random documents, both ways."""
from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from generator import yamlio

# the characters that decide YAML's quoting and styles, some the guard lets through and some it does not
_ALPHABET = st.sampled_from(list("ab :#-\n'\"{}[],&*!|>%@`?\\ 0123456789.eE+xo~=/_yYnNtTfF\t\r\x85é\u2028\x00"))
_TEXT = st.text(_ALPHABET, max_size=40) | st.text(_ALPHABET, min_size=100, max_size=300)
_SCALAR = _TEXT | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none()
_DOC = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=20)


def _python_emitter(docs: list) -> bytes:
    return yaml.dump_all(docs, Dumper=yamlio._Dumper, sort_keys=True, default_flow_style=False,
                         allow_unicode=True, width=4096, explicit_start=True).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_DOC, min_size=1, max_size=3))
def test_either_emitter_writes_the_same_bytes(docs):
    assert yamlio.dump_yaml_all(docs) == _python_emitter(docs)


def test_plain_documents_take_the_c_emitter():
    if yamlio._CDumper is None:  # PyYAML without libyaml: always the Python emitter
        return
    assert yamlio._dumper([{"kind": "ConfigMap", "data": {"a": "x\ny"}, "n": [1, 2.5, None, True]}]) is yamlio._CDumper
    for odd in ({"k": "a\rb"}, {"": 1}, {"k" * 200: 1}, {1: "x"}, {"k": "é"}, {"k": "\x85"}):
        assert yamlio._dumper([odd]) is yamlio._Dumper, odd


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOC)
def test_dump_yaml_is_the_python_emitters_too(doc):
    for sort_keys in (True, False):
        assert yamlio.dump_yaml(doc, sort_keys=sort_keys) == yaml.dump(
            doc, Dumper=yamlio._Dumper, sort_keys=sort_keys, default_flow_style=False, allow_unicode=True,
            width=4096).encode()
