"""workload.yaml: the input contract (pydantic models) and `load(path)` with line-aware errors.

Field names here are a public contract: other tools write these files. Unknown keys are errors.
Every error names the file, the line and the field, e.g.
`fleet.yaml:12: fleet.pools[0].gpu.count: must be at least 1 (got 0)`.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from .errors import OrchgenError

API_VERSION = "orchgen/v1alpha1"
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_YAML_NODES = 200_000  # after alias expansion: stops a "billion laughs" YAML bomb early
MAX_YAML_DEPTH = 40
MAX_NODES_PER_POOL = 65_536
MAX_FLEET_NODES = 65_536

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GPU_TYPE = re.compile(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
# A Git clone URL that Argo CD and Flux both accept, in the three forms Git hosts hand out. The
# characters are a safe subset on purpose: the URL lands in YAML, in a README code block and in a
# shell command there, so no quotes, backticks, spaces or `$`. No credentials: controllers take
# them from a Secret, and the bundle is committed. ssh keeps its user (git@), which is no secret;
# https gets none, since a token is often written as the user name (https://<token>@github.com/...).
_GIT_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_GIT_PATH = r"[A-Za-z0-9_.~%+-][A-Za-z0-9_.~%+/-]*"
_GIT_USER = r"[A-Za-z0-9._-]+"
GIT_URL_PATTERN = (rf"^(?:https://{_GIT_HOST}(?::[0-9]{{1,5}})?/{_GIT_PATH}"
                   rf"|ssh://(?:{_GIT_USER}@)?{_GIT_HOST}(?::[0-9]{{1,5}})?/{_GIT_PATH}"
                   rf"|{_GIT_USER}@{_GIT_HOST}:/?{_GIT_PATH})$")
_GIT_URL = re.compile(GIT_URL_PATTERN)
MAX_GIT_URL = 512


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _gpu_type(value: str) -> str:
    if len(value) > 32 or not _GPU_TYPE.match(value):
        raise ValueError(
            f"{value!r} is not a GRES type (lower-case letters, digits, '-' and '_', at most 32)"
        )
    return value


def _version(value: str) -> str:
    if not _VERSION.match(value):
        raise ValueError(f"{value!r} is not a MAJOR.MINOR version such as \"25.11\"")
    return value


def _git_url(value: str) -> str:
    if len(value) > MAX_GIT_URL:
        raise ValueError(f"longer than {MAX_GIT_URL} characters (got {len(value)})")
    # Never echoed: it may hold a token, and errors end up in CI logs.
    if re.match(r"^(https://[^/]*@|ssh://[^/@]*:[^/@]*@|[^/@:]+:[^/@]*@)", value):
        raise ValueError("must not carry credentials (a user, password or token in the URL): Argo CD "
                         "and Flux read them from a Secret, and this URL is committed with the bundle")
    if not _GIT_URL.match(value):
        why = " (it contains whitespace)" if re.search(r"\s", value) else ""
        raise ValueError(f"{_short(value)} is not a Git clone URL{why}: write https://host/path, "
                         "ssh://[user@]host/path or user@host:path")
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
GpuType = Annotated[str, AfterValidator(_gpu_type)]
Version = Annotated[str, AfterValidator(_version)]
GitUrl = Annotated[str, AfterValidator(_git_url)]


class _Model(BaseModel):
    # strict: a quoted "8" is not a node count, and 25.10 is not the version "25.10"
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Metadata(_Model):
    name: Name


class Gpu(_Model):
    type: GpuType = Field(description="GRES type, e.g. h100")
    count: int = Field(ge=1, le=64, description="GPUs per node")


class Pool(_Model):
    name: Name
    nodes: int = Field(ge=1, le=MAX_NODES_PER_POOL)
    hostnames: str | None = Field(
        default=None,
        description="Slurm hostlist of the pool's nodes; default <pool>-[001-NNN]",
    )
    gpu: Gpu | None = Field(default=None, description="omit for a CPU-only pool")
    cpus: int = Field(default=64, ge=1, le=16_384)
    memory_gib: int = Field(default=256, ge=4, le=1_048_576)
    nvlink_domain_nodes: int = Field(
        default=1, ge=1, le=1_024, description="nodes per NVLink domain (18 for GB200 NVL72)"
    )


class Fabric(_Model):
    kind: Literal["infiniband", "roce", "ethernet"] = "ethernet"
    nodes_per_leaf: int = Field(default=32, ge=1, le=4_096)
    leaves_per_spine: int | None = Field(
        default=None, ge=1, le=4_096, description="absent: one spine over all leaves"
    )


class FleetSpec(_Model):
    bare_metal: bool = False
    edge_or_dev: bool = False
    fabric: Fabric = Fabric()
    pools: list[Pool] = Field(min_length=1, max_length=256)


class Tenant(_Model):
    name: Name
    share: int = Field(default=1, ge=1, le=1_000_000)


class Workload(_Model):
    name: Name
    nodes: int = Field(default=1, ge=1, le=MAX_FLEET_NODES, description="nodes one job spans")
    tightly_coupled: bool = False
    bare_metal: bool | None = Field(default=None, description="default: fleet.bare_metal")
    long_lived_services: bool = False
    multi_tenant: bool = False
    python_native_pipeline: bool = False
    edge_or_dev: bool | None = Field(default=None, description="default: fleet.edge_or_dev")
    tenant: str | None = None
    pool: str | None = None
    gpus: int | None = Field(default=None, ge=0, le=16 * MAX_FLEET_NODES * 64)


class Options(_Model):
    gang_scheduler: Literal["auto", "kueue", "volcano", "kai"] = "auto"
    slurm_on_kubernetes: Literal["auto", "slinky", "soperator", "none"] = "auto"
    gitops: Literal["none", "kustomize", "argocd", "flux"] = "none"
    slurm_version: Version = "25.11"
    kubernetes_version: Version = "1.33"
    versions: dict[str, str] = Field(default_factory=dict, description="chart version by component")
    gitops_repo: GitUrl | None = Field(
        default=None,
        description="clone URL of the GitOps repository that Argo CD / Flux read this bundle from "
        "(the bundle sits at <metadata.name>/ in it); argocd writes it into its Applications",
        json_schema_extra={"pattern": GIT_URL_PATTERN, "maxLength": MAX_GIT_URL},
    )


class Fleet(_Model):
    apiVersion: Literal["orchgen/v1alpha1"]
    kind: Literal["Fleet"]
    metadata: Metadata
    fleet: FleetSpec
    tenants: list[Tenant] = Field(default_factory=list, max_length=1_024)
    workloads: list[Workload] = Field(min_length=1, max_length=4_096)
    options: Options = Options()


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of workload.yaml (for editors)."""
    schema = Fleet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "orchgen workload.yaml"
    return schema


# ---------------------------------------------------------------------------------------------
# YAML with line numbers


Path_ = tuple[str | int, ...]


class _Source:
    """The parsed document plus the line of every key and item, by path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Path_, int] = {}
        self._built = 0
        self._constructor = yaml.SafeLoader("")  # only its scalar constructors are used

    def error(self, message: str, path: Path_ = (), line: int | None = None) -> OrchgenError:
        return OrchgenError(message, self.file, line or self.line_of(path), format_path(path) or None)

    def line_of(self, path: Path_) -> int | None:
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def build(self, node: yaml.Node, path: Path_ = ()) -> Any:
        self._built += 1
        if self._built > MAX_YAML_NODES:
            raise self.error(f"document expands to more than {MAX_YAML_NODES} YAML nodes", path)
        if len(path) > MAX_YAML_DEPTH:
            raise self.error(f"nested deeper than {MAX_YAML_DEPTH} levels", path)
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.build_key(key_node, path)
                if key in out:
                    raise self.error(f"duplicate key {key!r}", path + (key,), key_node.start_mark.line + 1)
                self.lines[path + (key,)] = key_node.start_mark.line + 1
                out[key] = self.build(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        if node.tag not in _SCALAR_TAGS:
            raise self.error(f"unsupported YAML tag {node.tag}", path)
        return self._constructor.construct_object(node, deep=True)

    def build_key(self, node: yaml.Node, path: Path_) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            raise self.error("mapping keys must be plain strings", path, node.start_mark.line + 1)
        return str(node.value)


_SCALAR_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null")}


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _read(path: Path) -> tuple[_Source, Any]:
    src = _Source(str(path))
    if path.is_dir():
        raise src.error("is a directory, not a workload.yaml file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise src.error("no such file") from None
    except OSError as exc:
        raise src.error(f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise src.error(f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise src.error(f"not UTF-8 text (byte {exc.start})") from None
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except RecursionError:  # PyYAML composes recursively: `[[[[...` thousands deep overflows it
        raise src.error(f"malformed YAML: nested deeper than {MAX_YAML_DEPTH} levels") from None
    except yaml.reader.ReaderError as exc:  # a control character: it has a position, not a mark
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise src.error(f"malformed YAML: control character {char} is not allowed", line=line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        raise src.error(f"malformed YAML: {problem}", line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise src.error(f"malformed YAML: {exc}") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise src.error("file is empty: expected a Fleet document (apiVersion: orchgen/v1alpha1)")
    if len(nodes) > 1:
        raise src.error("holds several YAML documents; expected one Fleet", line=nodes[1].start_mark.line + 1)
    data = src.build(nodes[0])
    if not isinstance(data, dict):
        raise src.error("expected a mapping with apiVersion, kind, metadata, fleet, workloads", line=1)
    return src, data


def _message(err: dict[str, Any], data: Any) -> str:
    kind, loc = err["type"], err["loc"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(data, loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        return "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else f"; allowed: {', '.join(allowed)}")
    if kind == "missing":
        return "required field is missing"
    msg = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if kind == "literal_error" and isinstance(value, str):
        choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        hint = difflib.get_close_matches(value, choices, n=1)
        if hint:
            msg += f" (did you mean {hint[0]!r}?)"
    if kind in ("greater_than_equal", "less_than_equal", "too_short", "too_long"):
        msg += f" (got {_short(value)})" if not isinstance(value, (list, dict)) else ""
    if kind == "string_type" and isinstance(value, float) and loc and str(loc[-1]).endswith("version"):
        msg += f"; write the version in quotes, e.g. \"25.11\" (YAML read it as the number {value!r})"
    elif kind.endswith("_type") and not isinstance(value, (dict, list)):
        msg += f" (got {type(value).__name__} {_short(value)})"
    return msg


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _allowed_keys(data: Any, loc: tuple[Any, ...]) -> list[str]:
    model: Any = Fleet
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _model_of(field.annotation)
    return sorted(getattr(model, "model_fields", {}))


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def load(path: str | Path) -> Fleet:
    """Parse and check a workload.yaml; raise OrchgenError naming file, line and field."""
    return load_located(path)[0]


def load_located(path: str | Path) -> tuple[Fleet, Callable[[OrchgenError], OrchgenError]]:
    """`load`, plus a function that points a later error (the planner's or a renderer's, which
    name a field but know no file or line) at the file and line of that field."""
    src, data = _read(Path(path))
    fields = {format_path(key): line for key, line in src.lines.items()}

    def locate(err: OrchgenError) -> OrchgenError:
        if err.field and err.line is None:
            field = err.field
            while field and field not in fields:  # fall back to the nearest enclosing key
                field = field[: max(field.rfind("."), field.rfind("["), 0)]
            err.file, err.line = src.file, fields.get(field)
        return err

    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as exc:
        errors = sorted(exc.errors(), key=lambda e: (src.line_of(_loc(e)) or 0, format_path(_loc(e))))
        first = errors[0]
        more = f" (and {len(errors) - 1} more error{'s' * (len(errors) > 2)})" if len(errors) > 1 else ""
        raise src.error(_message(first, data) + more, _loc(first)) from None
    from .checks import check_fleet  # cross-field rules need the hostlist module

    for message, loc in check_fleet(fleet):
        raise src.error(message, loc)
    return fleet, locate


def _loc(err: dict[str, Any]) -> Path_:
    # pydantic inserts validator names into loc for constrained types; keep only real keys
    return tuple(p for p in err["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "literal[")))
