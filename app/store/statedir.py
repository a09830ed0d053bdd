"""Load a cluster view from YAML files (the `--state-dir` of SPEC §9, and `kerf explain`).

A document of a kind kerf does not read (an Ingress, a Role, a Kustomization) is skipped,
so an application's directory loads as it is; the view's warnings say once what was
skipped, by kind. `-` names standard input (`kubectl kustomize DIR | kerf explain -f -`).
"""

from __future__ import annotations

import errno
import gc
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from app.model.apitime import rfc3339
from app.model.crd import API_GROUP, InvalidObject, object_label, parse_object, quote_ratios
from app.model.durations import DurationError, parse_duration
from app.model.quantities import QuantityError, parse_resource
from app.model.recommendations import DATA_KEY
from app.model.workloads import WORKLOAD_KINDS, pod_template
from app.runtime.clock import utc_now
from app.store.view import CORE_KINDS, ClusterView
from app.store.yamlload import load_all

YAML_SUFFIXES = (".yaml", ".yml", ".json")
#: The path that names standard input.
STDIN = "-"
#: The kind of a kustomize directory's `kustomization.yaml`, whose output kerf reads.
KUSTOMIZATION = "Kustomization"


#: A time relative to the one kerf decides at: `${now}`, `${now-26h}`, `${now+1h30m}` (a Go
#: duration), anywhere in a file's text, also inside a JSON string such as a
#: recommendation row's `analyzedAt`. Examples written so never age (docs/decisions.md).
RELATIVE_TIME = re.compile(r"\$\{now(?:([+-])([^}\n]*))?\}")


class LoadError(ValueError):
    """A state file cannot be loaded; the message names the file and the object."""


def relative_times(text: str, now: datetime, source: str = "") -> str:
    """`text` with each `${now±DURATION}` replaced by that time in RFC 3339, to the second."""
    if "${now" not in text:  # most files: no scan
        return text

    def fill(match: re.Match[str]) -> str:
        sign, offset = match.groups()
        if sign is None:
            return rfc3339(now)
        try:
            delta = parse_duration(offset)
        except DurationError as exc:
            line = text.count("\n", 0, match.start()) + 1
            raise LoadError(f"{source}: line {line}: {match[0]}: {exc}") from None
        return rfc3339(now + delta if sign == "+" else now - delta)

    return RELATIVE_TIME.sub(fill, text)


def _missing(path: Path) -> LoadError:
    """Why a named path is neither a file nor a directory, said plainly."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return LoadError(f"{path}: symbolic link loop (a link that resolves to itself)")
        if path.is_symlink():
            return LoadError(f"{path}: dangling symbolic link to {os.readlink(path)}")
        if exc.errno == errno.ENOENT:
            return LoadError(f"{path}: no such file or directory")
        return LoadError(f"{path}: cannot read: {exc.strerror}")
    return LoadError(f"{path}: not a regular file or directory")


def _files(paths: Iterable[str | Path]) -> list[Path | None]:
    """The files to read, in order; None stands for standard input."""
    files: list[Path | None] = []
    for raw in paths:
        if str(raw) == STDIN:
            files.append(None)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES)
            if not found:
                # An empty view would decide nothing and say nothing: a wrong path.
                raise LoadError(f"no YAML files in {path} (looked for {', '.join(YAML_SUFFIXES)})")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise _missing(path)
    return files


def _json_documents(text: str) -> list[Any] | None:
    """A file that is one JSON value (a `kubectl get -o json` dump), parsed by orjson; None
    when it is not JSON, so YAML (a superset) parses it and reports any error."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return [orjson.loads(text)]
    except orjson.JSONDecodeError:
        return None


def _read(path: Path | None) -> str:
    try:
        if path is None:
            return sys.stdin.buffer.read().decode("utf-8")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"{path or '<stdin>'}: cannot read: {exc}") from None


def _documents(file: Path | None, now: datetime) -> Iterator[tuple[str, Any]]:
    path = file or "<stdin>"
    text = _read(file)
    if file is None and not text.strip():
        # Nothing piped: most likely the command before the pipe failed.
        raise LoadError(
            "<stdin>: no documents on standard input (did the command before the pipe fail?)"
        )
    text = relative_times(text, now, str(path))
    documents = _json_documents(text)
    if documents is None:
        try:
            documents = load_all(text)
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: a bad `!!int` and the like
            mark = getattr(exc, "problem_mark", None)
            where = f": line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise LoadError(f"{path}{where}: invalid YAML: {problem}") from None
    for index, doc in enumerate(documents):
        if doc is None:
            continue
        source = f"{path} (document {index + 1})"
        if isinstance(doc, dict) and doc.get("kind") == "List":
            for item in doc.get("items") or []:
                yield source, item
        else:
            yield source, doc


@dataclass(slots=True)
class Loaded:
    """The objects kerf reads, in file order, and how many documents of each other kind
    were skipped."""

    objects: list[Any] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def skipped_summary(self) -> str | None:
        """One line naming the skipped documents by kind, most frequent first; None when
        nothing was skipped."""
        if not self.skipped:
            return None
        total = sum(self.skipped.values())
        kinds = ", ".join(
            f"{kind} {count}"
            for kind, count in sorted(self.skipped.items(), key=lambda kc: (-kc[1], kc[0]))
        )
        line = f"skipped {total} document{'s' if total != 1 else ''} of kinds kerf does not read: {kinds}"
        if KUSTOMIZATION in self.skipped:
            line += " (for a Kustomization's output: kubectl kustomize DIR | kerf explain -f -)"
        return line


def read_objects(
    paths: Iterable[str | Path], now: datetime | None = None, notes: list[str] | None = None
) -> Loaded:
    """Every object of the files kerf reads (kerf CRs as validated models), in file order,
    and the kinds skipped; relative times (`${now-26h}`) are taken from `now` (default: the
    clock's), and what the files hold that a cluster would refuse but kerf can read goes to
    `notes`."""
    now = utc_now() if now is None else now
    loaded = Loaded()
    # Loading allocates millions of containers and frees none: each full collection the
    # allocations trigger would scan everything loaded so far, for no garbage (a state dir
    # holds no reference cycles). Collections resume when loading ends.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for path in _files(paths):
            for source, doc in _documents(path, now):
                obj = _object(source, doc, notes if notes is not None else [])
                if isinstance(obj, _Skipped):
                    loaded.skipped[obj.kind] += 1
                elif obj is not None:
                    loaded.objects.append(obj)
    finally:
        if collecting:
            gc.enable()
    return loaded


def load_objects(
    paths: Iterable[str | Path], now: datetime | None = None, notes: list[str] | None = None
) -> list[Any]:
    """Every object of the files that kerf reads, in file order (`read_objects`)."""
    return read_objects(paths, now, notes).objects


@dataclass(frozen=True, slots=True)
class _Skipped:
    kind: str


def _object(source: str, doc: Any, notes: list[str]) -> Any:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kind"), str):
        raise LoadError(f"{source}: not a Kubernetes object (needs apiVersion and kind)")
    kind = doc["kind"]
    if str(doc.get("apiVersion", "")).startswith(API_GROUP + "/"):
        doc = dict(doc)
        notes += [f"{source}: {object_label(doc)}: {n}" for n in quote_ratios(doc)]
        try:
            return parse_object(doc, source)
        except InvalidObject as exc:
            raise LoadError(str(exc)) from None
    if kind not in WORKLOAD_KINDS and kind not in CORE_KINDS:
        return _Skipped(kind)
    if not isinstance(doc.get("metadata"), Mapping) or not doc["metadata"].get("name"):
        raise LoadError(f"{source}: {object_label(doc)}: metadata.name is required")
    if kind == "ConfigMap" and DATA_KEY not in (doc.get("data") or {}):
        return None  # the view keeps the labelled ones and Kubex's (ClusterView.apply)
    problem = _quantity_problem(doc)
    if problem is not None:
        raise LoadError(f"{source}: {object_label(doc)}: {problem}")
    return doc


def _quantity_problem(doc: Mapping[str, Any]) -> str | None:
    """The first container resource quantity that does not parse (the API server would
    have refused the object), as `path: message`."""
    spec = pod_template(doc).get("spec") if doc.get("kind") in WORKLOAD_KINDS else doc.get("spec")
    if not isinstance(spec, Mapping):
        return None
    prefix = "spec.template.spec" if doc.get("kind") in WORKLOAD_KINDS else "spec"
    groups: tuple[Literal["containers"], Literal["initContainers"]] = (
        "containers",
        "initContainers",
    )
    for group in groups:
        for index, container in enumerate(spec.get(group) or []):
            resources = (container or {}).get("resources") or {}
            for fld in ("requests", "limits"):
                for resource, quantity in (resources.get(fld) or {}).items():
                    try:
                        parse_resource(resource, quantity)
                    except QuantityError as exc:
                        return f"{prefix}.{group}[{index}].resources.{fld}.{resource}: {exc}"
    return None


def load_view(
    paths: Iterable[str | Path],
    *,
    own_namespace: str = "kerf-system",
    kubex_source: tuple[str, str] | None = None,
    now: datetime | None = None,
) -> ClusterView:
    """A synced ClusterView of every object in the given files and directories, relative
    times taken from `now`: the time a command decides at (default: the clock's)."""
    view = ClusterView(own_namespace=own_namespace, kubex_source=kubex_source)
    loaded = read_objects(paths, now, view.warnings)
    for obj in loaded.objects:
        view.apply(obj)
    view.mark_synced(utc_now())
    summary = loaded.skipped_summary()
    if summary is not None:
        view.warnings.append(summary)
    return view
