"""A protobuf wire-format reader and the Kubernetes protobuf envelope.

kubectl 1.32 and later send typed objects as `application/vnd.kubernetes.protobuf`: the
four bytes `k8s\\0`, then a `runtime.Unknown` message whose `raw` field holds the object's
own message. This module reads that framing and turns a message into JSON-shaped values
with a field table (`kubesim.protoschema`); it knows nothing about particular kinds.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class DecodeError(ValueError):
    """The body is not a message kubesim can read."""


@dataclass(frozen=True)
class Field:
    """One field of a message table.

    `kind` is one of: string, bytes (base64 in JSON), int, bool, time, quantity,
    intorstr, message (`message` is its table), inline (an embedded message whose
    fields JSON shows in the parent), map (string values), map_bytes, map_quantity,
    skip (read past, not decoded). `keep` says the JSON form shows the field even at
    its zero value (pointer fields, `{}` included, and fields without `omitempty`);
    other zero values are dropped, because the Go encoder writes every non-pointer
    field, set or not.
    """

    name: str
    kind: str
    repeated: bool = False
    keep: bool = False
    message: Message | None = None


@dataclass(frozen=True)
class Message:
    """A message table: its protobuf name (for errors) and fields by number."""

    name: str
    fields: dict[int, Field]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field on the wire, in order."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire == LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise DecodeError("truncated length-delimited field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if pos + width > len(buf):
                raise DecodeError("truncated fixed-width field")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise DecodeError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    """int32/int64 travel as two's complement in 64 bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value: int | bytes, where: str) -> str:
    if not isinstance(value, bytes):
        raise DecodeError(f"{where}: expected a length-delimited string")
    try:
        return value.decode()
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: not UTF-8") from exc


def _bytes(value: int | bytes, where: str) -> bytes:
    if not isinstance(value, bytes):
        raise DecodeError(f"{where}: expected a length-delimited field")
    return value


def _int(value: int | bytes, where: str) -> int:
    if isinstance(value, bytes):
        raise DecodeError(f"{where}: expected a varint")
    return _signed(value)


def _time(raw: bytes, where: str) -> str | None:
    seconds = 0
    for number, _, value in fields(raw):
        if number == 1:
            seconds = _int(value, where)
    if seconds == 0:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(raw: bytes, where: str) -> int | str:
    kind, number_value, text = 0, 0, ""
    for number, _, value in fields(raw):
        if number == 1:
            kind = _int(value, where)
        elif number == 2:
            number_value = _int(value, where)
        elif number == 3:
            text = _text(value, where)
    return text if kind == 1 else number_value


def _map_entry(raw: bytes, where: str) -> tuple[str, bytes]:
    key, value_raw = "", b""
    for number, _, value in fields(raw):
        if number == 1:
            key = _text(value, where)
        elif number == 2:
            value_raw = _bytes(value, where)
    return key, value_raw


def _quantity(raw: bytes, where: str) -> str:
    text = ""
    for number, _, value in fields(raw):
        if number == 1:
            text = _text(value, where)
    return text


def _scalar(spec: Field, value: int | bytes, where: str) -> Any:
    kind = spec.kind
    if kind == "string":
        return _text(value, where)
    if kind == "bytes":
        return base64.b64encode(_bytes(value, where)).decode()
    if kind == "int":
        return _int(value, where)
    if kind == "bool":
        return bool(_int(value, where))
    if kind == "time":
        return _time(_bytes(value, where), where)
    if kind == "quantity":
        return _quantity(_bytes(value, where), where)
    if kind == "intorstr":
        return _int_or_string(_bytes(value, where), where)
    if kind == "message":
        assert spec.message is not None
        return decode(spec.message, _bytes(value, where))
    raise DecodeError(f"{where}: no reader for {kind}")


def _is_zero(value: Any) -> bool:
    return value is None or value in ("", 0, False) or value == {} or value == []


def decode(table: Message, buf: bytes) -> dict[str, Any]:
    """A message as the JSON object the API would show, zero values dropped unless `keep`.

    A field number missing from the table raises DecodeError: kubesim refuses what it
    cannot read rather than store a partial object.
    """
    out: dict[str, Any] = {}
    kept: set[str] = set()
    for number, wire, value in fields(buf):
        spec = table.fields.get(number)
        if spec is None:
            raise DecodeError(f"field {number} of {table.name} is not known to kubesim")
        where = f"{table.name}.{spec.name}"
        if spec.kind == "skip":
            continue
        if spec.kind == "inline":
            # An embedded struct whose fields JSON shows in the parent (Volume's source).
            assert spec.message is not None
            inlined = decode(spec.message, _bytes(value, where))
            out.update(inlined)
            kept.update(inlined)
        elif spec.kind in ("map", "map_bytes", "map_quantity"):
            key, raw = _map_entry(_bytes(value, where), where)
            entries = out.setdefault(spec.name, {})
            if spec.kind == "map":
                entries[key] = _text(raw, where)
            elif spec.kind == "map_bytes":
                entries[key] = base64.b64encode(raw).decode()
            else:
                entries[key] = _quantity(raw, where)
        elif spec.repeated:
            if spec.kind == "int" and wire == LENGTH:
                # Packed repeated integers: a run of varints in one field.
                packed, pos = _bytes(value, where), 0
                while pos < len(packed):
                    item, pos = _varint(packed, pos)
                    out.setdefault(spec.name, []).append(_signed(item))
            else:
                out.setdefault(spec.name, []).append(_scalar(spec, value, where))
        else:
            out[spec.name] = _scalar(spec, value, where)
            if spec.keep:
                kept.add(spec.name)
    return {
        name: value
        for name, value in out.items()
        if not _is_zero(value) or (name in kept and value is not None)
    }


@dataclass(frozen=True)
class Envelope:
    """A `runtime.Unknown`: the object's apiVersion and kind, and its encoded message."""

    api_version: str
    kind: str
    raw: bytes


def unwrap(body: bytes) -> Envelope:
    """Read the `k8s\\0` + runtime.Unknown framing of a protobuf request body."""
    if not body.startswith(MAGIC):
        raise DecodeError("the body does not start with the Kubernetes protobuf prefix")
    api_version, kind, raw, encoding = "", "", b"", ""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, _, item in fields(_bytes(value, "Unknown.typeMeta")):
                if sub == 1:
                    api_version = _text(item, "TypeMeta.apiVersion")
                elif sub == 2:
                    kind = _text(item, "TypeMeta.kind")
        elif number == 2:
            raw = _bytes(value, "Unknown.raw")
        elif number == 3:
            encoding = _text(value, "Unknown.contentEncoding")
    if encoding:
        raise DecodeError(f"content encoding {encoding!r} is not supported")
    return Envelope(api_version, kind, raw)
