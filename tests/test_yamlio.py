"""generator.yamlio writes a document with libyaml's emitter only where it gives the same bytes as PyYAML's
Python emitter (the bundle's bytes must not depend on which one wrote them): random documents, both ways."""
from __future__ import annotations

import json

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


# --- issue 41: the bundle's own emitter (yamlio._emit) against PyYAML's Python emitter -----------------------
# Words whose plain form YAML reads as something else than a string (booleans, nulls, numbers in YAML 1.1's
# and Go's shapes, merge and value keys), indicators at the start, inside and at the end, and the blanks and
# line breaks that decide between plain, quoted and literal text.
_TRICKY = st.sampled_from(["yes", "on", "Off", "NO", "y", "n", "true", "null", "Null", "~", "", "1e3", "1E+3", "-1.5",
                           ".5", "0o17", "017", "0x1f", "1_000", "12:30", ".inf", "-.nan", "<<", "=", "---", "...",
                           "--- x", "a: b", "a:b", "a:", ":a", ": a", "a #b", "a#b", "#a", "- a", "-a", "? a", "?a",
                           "it's", "'q'", '"q"', "@a", "`a", "%a", "!a", "&a", "*a", "|", ">", "{a}", "[a]", "a,b",
                           " a", "a ", "  ", "a\nb", "a\n", "a\n\n", "\na", "\n", " a\nb", "a \nb", "a\n b",
                           "a\\b", "x y"])
_ASCII_TEXT = st.text(st.sampled_from(list("ab :#-\n'\"{}[],&*!|>%@`?\\ 0123456789.eE+xo~=/_yYnNtTfF")), max_size=30)
_FAST_TEXT = _TRICKY | _ASCII_TEXT | st.builds(lambda a, b: a + b, _TRICKY, _TRICKY)
_FAST_SCALAR = _FAST_TEXT | st.integers() | st.floats() | st.booleans() | st.none()
_FAST_KEY = _TRICKY.filter(lambda k: k and "\n" not in k) | st.text(st.sampled_from(list("ab :#-'\"?1.~")),
                                                                      min_size=1, max_size=20)
_FAST_DOC = st.recursive(_FAST_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                         | st.dictionaries(_FAST_KEY, inner, max_size=4), max_leaves=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.dictionaries(_FAST_KEY, _FAST_DOC, max_size=5) | st.lists(_FAST_DOC, max_size=5),
                min_size=1, max_size=3), st.booleans())
def test_fast_emitter_writes_pythons_bytes(docs, sort_keys):
    """The documents a bundle holds (ASCII text, str keys, numbers, booleans, nulls, nested lists and dicts)
    are written by yamlio's own emitter, never by PyYAML, and to the same bytes as PyYAML's Python emitter."""
    expected = _python_emitter(docs)
    assert yamlio._emit(docs, "---", True).encode() == expected
    assert yamlio.dump_yaml_all(docs) == expected
    doc = docs[0]
    assert yamlio._emit([doc], "", sort_keys).encode() == yamlio.dump_yaml(doc, sort_keys=sort_keys) == yaml.dump(
        doc, Dumper=yamlio._Dumper, sort_keys=sort_keys, default_flow_style=False, allow_unicode=True,
        width=4096).encode()


def test_fast_emitter_folds_long_lines_as_pyyaml():
    """A line longer than the width (4096) is folded at a lone space past it, plain or quoted (a CEL rule
    of a ValidatingAdmissionPolicy can be that long); a literal block never is."""
    for word, sep in (("ab", " "), ("it's", " "), ("a:b", " "), ("ab", "  "), ("'", " '"), ("x", " ' ")):
        for n in (1400, 3000):
            text = sep.join([word] * n)
            docs = [{"k" * 100: text, "l": [text, {"a b": text}], "m": {"n": [[text, text + "\nx"]]}},
                    [text, " " + text, text + " "]]
            assert yamlio._emit(docs, "---", True).encode() == _python_emitter(docs), (word, sep, n)


def test_fast_emitter_leaves_the_rest_to_pyyaml():
    """What it does not cover goes to PyYAML whole (a bare scalar, a long or empty key, other types, non-ASCII
    text), and still comes out as the Python emitter writes it."""
    for odd in ([{"k": "é"}], [{"k": "a\rb"}], [{"": 1}], [{"k" * 130: 1}], [{1: "x"}], ["scalar"],
                [{"k": 1.5j}], [{"k": "a \n" * 700}]):
        try:
            yamlio._emit(odd, "---", True)
        except yamlio._Unsupported:
            pass
        else:
            raise AssertionError(f"{odd!r}: written by the fast emitter")
        if odd != [{"k": 1.5j}]:  # not YAML at all: PyYAML refuses it
            assert yamlio.dump_yaml_all(odd) == _python_emitter(odd)


_JSON_SCALAR = st.text(max_size=12) | st.integers() | st.floats() | st.booleans() | st.none()
_JSON_DOC = st.recursive(_JSON_SCALAR, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)


@settings(max_examples=200, deadline=None)
@given(_JSON_DOC)
def test_dump_json_is_the_json_modules(doc):
    """dump_json builds plan.json's and checks.json's text itself (issue 41): json.dumps's bytes."""
    assert yamlio.dump_json(doc) == (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    for other in ({1: "x", 2: [1]}, {"a": {2: None, 1.5: True}}):  # keys json converts: left to json.dumps
        assert yamlio.dump_json(other) == (json.dumps(other, indent=2, sort_keys=True, ensure_ascii=False)
                                           + "\n").encode()


# Long lists of host names (bringup/vars.yaml's and the inventory's hosts) are written in one join when every
# name is plain as it is (yamlio._plain_names); a word YAML reads as a bool or null, a name too long for a simple
# key, a character outside names, or an item that is not a string sends the list back to the per-item path.
_NAME = st.text(st.sampled_from(list("ab0-._/")), max_size=8).map(lambda s: "h" + s)
_NAME_LIST = st.lists(_NAME | _TRICKY | st.sampled_from(["x" * 122, "x" * 123, "x" * 127, "x" * 128, "1h", "h:", "h y", "ON"]),
                      min_size=14, max_size=24) | st.lists(_NAME, min_size=14, max_size=24)


@settings(max_examples=25, deadline=None)
@given(_NAME_LIST, st.booleans())
def test_long_name_lists_are_pythons_bytes(names, sort_keys):
    docs = [{"hosts": dict.fromkeys(names), "nodes": names, "deep": {"a": [names, {"b": dict.fromkeys(names)}]}},
            names, dict.fromkeys(names), [names + [1]], dict.fromkeys(names, 1)]
    assert yamlio.dump_yaml_all(docs) == _python_emitter(docs)
    for doc in docs:
        assert yamlio.dump_yaml(doc, sort_keys=sort_keys) == yaml.dump(
            doc, Dumper=yamlio._Dumper, sort_keys=sort_keys, default_flow_style=False, allow_unicode=True,
            width=4096).encode()


def test_a_word_yaml_reads_otherwise_in_a_long_name_list():
    """Every name plain but one that YAML 1.1 reads as a bool or null: that one is quoted, as PyYAML does."""
    names = [f"gpu{i:03d}" for i in range(20)]
    for word in ("yes", "No", "ON", "off", "TRUE", "False", "y", "N", "null", "Null", "NULL", "on1", "nulls"):
        for at in (0, 7, 20):
            listed = names[:at] + [word] + names[at:]
            docs = [{"hosts": dict.fromkeys(listed), "nodes": listed}, listed]
            assert yamlio.dump_yaml_all(docs) == _python_emitter(docs), (word, at)


def test_dump_json_writes_a_shared_dict_each_time():
    """checks.json's nodes share one dict per node group: written in full under every key, as json.dumps."""
    shape, other = {"gpus": 8, "gpu_type": "h100", "n": [1, {"x": None}]}, {"gpus": 4}
    doc = {"nodes": {f"n{i:03d}": shape if i % 3 else other for i in range(40)}, "again": shape, "list": [shape, shape]}
    assert yamlio.dump_json(doc) == (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def test_a_simple_key_is_at_most_122_characters():
    """PyYAML's check_simple_key counts a key's tag ("!!str") with its text, implicit or not: a key of 123-127
    characters is written `? key` (the fast emitter wrote those plain before, unlike PyYAML)."""
    for n in range(118, 130):
        for key in ("x" * n, "'" + "x" * (n - 1)):
            for doc in ({key: 1}, {"a": {key: None}}, [{key: [1]}]):
                assert yamlio.dump_yaml(doc) == yaml.dump(doc, Dumper=yamlio._Dumper, default_flow_style=False,
                                                          allow_unicode=True, width=4096).encode(), (n, key)
