"""Calling a student's function and recording what it did, as plain data.

This is the only part of grading that runs student code, so it is kept apart from judging:
in the sandbox it turns each test case into an :class:`Observation` (tensors, strings and
numbers only), which crosses the process boundary through :func:`to_wire` / :func:`from_wire`
in a plain layout: a JSON header (fields, numbers, text, each tensor's dtype, shape and place) and
the tensors' raw bytes, rebuilt with ``torch.frombuffer``; a reply in any other layout is refused, never unpickled.  Whatever bytes the student's
process writes, only numbers, text and exact tensors of plain dtypes come back (a tensor subclass
with a friendly ``__eq__`` arrives as the name of its type, a meta or complex tensor as a description
of why it is unusable).
"""
from __future__ import annotations

import json
import math
import struct
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Case:
    """One call of the student's function.

    ``args`` are positional arguments (tensors or floats); ``grad_wrt`` lists the indices of
    tensor arguments that get ``requires_grad=True``; the gradient of ``output.sum()`` with
    respect to them is recorded.
    """

    args: tuple
    grad_wrt: tuple[int, ...] = ()
    note: str = ""


@dataclass
class Observation:
    """What one call produced.  ``value`` is a plain torch.Tensor, or None with ``value_type``
    naming what was returned instead."""

    value: torch.Tensor | None = None
    value_type: str = "Tensor"
    error: str | None = None  # "ExceptionClass: its message" (the class alone when it has none), for the instructor
    error_type: str | None = None  # the exception's class name (student-chosen: the grader allowlists it)
    grads: dict[int, torch.Tensor | None] = field(default_factory=dict)
    grad_error: str | None = None
    args_after: tuple = ()


def _fresh_args(case: Case) -> tuple:
    fresh = []
    for index, arg in enumerate(case.args):
        if isinstance(arg, torch.Tensor):
            arg = arg.detach().clone()
            if index in case.grad_wrt:
                arg.requires_grad_(True)
        fresh.append(arg)
    return tuple(fresh)


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    """A detached copy as an exact torch.Tensor (never a subclass)."""
    return tensor.detach().as_subclass(torch.Tensor).clone()


def _error_text(exc: BaseException) -> str:
    """"ExceptionClass: its message", or the class alone when the message is empty (``raise NotImplementedError()``)
    or cannot be made; in no language: the grader words the sentence in the notebook's, which the sandbox does not
    know."""
    try:
        message = str(exc)
    except Exception:  # a class of the student's own whose __str__ raises
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def observe(function: Callable, case: Case) -> Observation:
    """Call ``function`` on a fresh copy of the case's inputs and record everything."""
    args = _fresh_args(case)
    observation = Observation()
    # A warning printed to stderr must never cost a correct answer its points.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = function(*args)
        except Exception as exc:  # the student's bug is data here, not a crash
            observation.error = _error_text(exc)
            observation.error_type = type(exc).__name__
            return observation
        if type(value) is not torch.Tensor:
            observation.value_type = type(value).__name__
        elif case.grad_wrt:
            try:
                value.sum().backward()
                observation.grads = {i: (None if args[i].grad is None else _plain(args[i].grad))
                                     for i in case.grad_wrt}
            except Exception as exc:
                observation.grad_error = f"{type(exc).__name__}: {exc}"
    if type(value) is torch.Tensor:
        observation.value = _plain(value)
    observation.args_after = tuple(_plain(a) if isinstance(a, torch.Tensor) else a for a in args)
    return observation


# ----------------------------------------------------------------------------- replies (sandbox -> grader)
# A reply travels as a JSON header and the tensors' raw bytes: torch.save in the sandbox and
# torch.load(weights_only=True) in the grader, a pure-Python unpickler reading byte by byte, cost several times
# more per observation, and a batch sends thousands (bench/RESULTS.md, grading speed).
PLAIN_MAGIC = b"RLOBS1\n"  # a reply in the plain layout: magic, 4-byte header length, JSON header, tensor bytes
OBSERVATION_FIELDS = frozenset({"value", "value_type", "error", "error_type", "grads", "grad_error", "args_after"})
# The dtypes that cross the boundary either way, by name ("torch.float32"); the judges compute with no others.
_ENCODED_DTYPES = {str(d): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
                                       torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)}


def _raw_bytes(contiguous: torch.Tensor) -> bytes:
    return contiguous.reshape(-1).view(torch.uint8).numpy().tobytes() if contiguous.numel() else b""


def _plain_entry(value, blobs: list, offset: list):
    """A JSON-able description of one field value; tensor bytes go to ``blobs``."""
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.device.type != "cpu" or value.layout != torch.strided \
                or str(value.dtype) not in _ENCODED_DTYPES:
            return {"unusable": f"a tensor on device {value.device.type} with layout {value.layout} and dtype {value.dtype}"}
        data = _raw_bytes(value.detach().contiguous())
        entry = {"dtype": str(value.dtype), "shape": list(value.shape), "offset": offset[0], "nbytes": len(data)}
        blobs.append(data)
        offset[0] += len(data)
        return entry
    return {"plain": value}


def to_wire(observation: Observation) -> bytes:
    blobs: list = []
    offset = [0]
    header = {"value": _plain_entry(observation.value, blobs, offset), "value_type": str(observation.value_type),
              "error": observation.error, "error_type": observation.error_type,
              "grads": [[int(i), _plain_entry(g, blobs, offset)] for i, g in observation.grads.items()],
              "grad_error": observation.grad_error,
              "args_after": [_plain_entry(a, blobs, offset) for a in observation.args_after]}
    text = json.dumps(header).encode()
    return PLAIN_MAGIC + struct.pack("<I", len(text)) + text + b"".join(blobs)


class _Unusable:
    def __init__(self, reason: str):
        self.reason = reason


def _plain_value(entry, blob: bytes):
    if not isinstance(entry, dict) or len(entry) not in (1, 4):
        raise ValueError("malformed field")
    if "plain" in entry:
        value = entry["plain"]
        if value is not None and type(value) not in (bool, int, float, str):
            raise ValueError("malformed plain value")
        return value
    if "unusable" in entry:
        return _Unusable(_short_text(entry["unusable"], "unusable", 300) or "?")
    dtype_name, shape, start, size = entry.get("dtype"), entry.get("shape"), entry.get("offset"), entry.get("nbytes")
    if dtype_name not in _ENCODED_DTYPES or not isinstance(shape, list) or len(shape) > 8 \
            or not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape) \
            or type(start) is not int or type(size) is not int:
        raise ValueError("malformed tensor entry")
    dtype, count = _ENCODED_DTYPES[dtype_name], math.prod(shape)
    if count > MAX_ELEMENTS:
        return _Unusable(f"a tensor of {count} elements")
    if size != count * dtype.itemsize or start < 0 or start + size > len(blob):
        raise ValueError("tensor bytes out of range")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(blob[start:start + size]), dtype=dtype).reshape(shape)


def _from_plain(data: bytes) -> dict:
    try:
        (length,) = struct.unpack_from("<I", data, len(PLAIN_MAGIC))
        start = len(PLAIN_MAGIC) + 4
        header = json.loads(data[start:start + length])
    except (struct.error, ValueError, RecursionError):
        raise ValueError("unreadable observation (header)") from None
    blob = data[start + length:]
    if not isinstance(header, dict) or set(header) != OBSERVATION_FIELDS:
        raise ValueError("the observation does not have the expected fields")
    grads = header["grads"]
    if not isinstance(grads, list) or not all(isinstance(g, list) and len(g) == 2 and type(g[0]) is int for g in grads):
        raise ValueError("malformed gradients or inputs")
    if not isinstance(header["args_after"], list):
        raise ValueError("malformed gradients or inputs")
    return {"value": _plain_value(header["value"], blob), "value_type": header["value_type"], "error": header["error"],
            "error_type": header["error_type"],
            "grads": {index: _plain_value(entry, blob) for index, entry in grads}, "grad_error": header["grad_error"],
            "args_after": [_plain_value(entry, blob) for entry in header["args_after"]]}


# ----------------------------------------------------------------------------- requests (grader -> sandbox)
# A test case travels into the sandbox as plain Python data (names, numbers, tuples and the raw bytes
# of each tensor) instead of a torch archive: no torch.save on the grader's side, no unpickler in the
# sandbox's supervisor (it relays the frame untouched), a cheap decode in the child.  This direction
# carries only the grader's own data (pickled; the child unpickles what the grader wrote).

def _encode_value(value):
    if type(value) is torch.Tensor and str(value.dtype) in _ENCODED_DTYPES and value.device.type == "cpu" \
            and value.layout == torch.strided:
        compact = value.detach().clone(memory_format=torch.contiguous_format)
        data = _raw_bytes(compact)
        return ("tensor", str(value.dtype), tuple(value.shape), tuple(value.stride()), value.requires_grad, data)
    if value is None or type(value) in (bool, int, float, str):
        return ("plain", value)
    if type(value) in (list, tuple):
        return (type(value).__name__, [_encode_value(v) for v in value])
    raise TypeError(f"cannot send a {type(value).__name__} to the sandbox")


def _decode_value(item):
    kind = item[0]
    if kind == "plain":
        return item[1]
    if kind in ("list", "tuple"):
        values = [_decode_value(v) for v in item[1]]
        return values if kind == "list" else tuple(values)
    _, dtype_name, shape, stride, requires_grad, data = item
    dtype = _ENCODED_DTYPES[dtype_name]
    if data:
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
    else:
        tensor = torch.empty(shape, dtype=dtype)
    if tensor.dim() and tuple(tensor.stride()) != tuple(stride):  # the layout the grader built, when it can be
        try:
            strided = torch.empty_strided(shape, stride, dtype=dtype)
            strided.copy_(tensor)
            tensor = strided
        except RuntimeError:
            pass
    return tensor.requires_grad_(True) if requires_grad else tensor


def encode_call(function: str, args, grad_wrt) -> bytes:
    """One call request's body: the function's name, its arguments, the gradient indices."""
    import pickle
    return pickle.dumps((str(function), [_encode_value(a) for a in args], [int(i) for i in grad_wrt]), protocol=5)


def decode_call(body: bytes) -> tuple[str, list, list[int]]:
    import pickle
    function, args, grad_wrt = pickle.loads(body)
    return function, [_decode_value(a) for a in args], grad_wrt


MAX_ELEMENTS = 1 << 20  # per tensor: far above any test case, far below the grader's memory


def _checked_tensor(value, what: str) -> torch.Tensor | None:
    """A tensor the judges can safely compute with: an exact CPU, strided torch.Tensor of a plain
    dtype and bounded size.  Anything else raises ``ValueError`` naming what it was."""
    if value is None:
        return None
    if isinstance(value, _Unusable):
        raise ValueError(f"{what} is {value.reason}")
    if type(value) is not torch.Tensor:
        raise ValueError(f"{what} is a {type(value).__name__}, not a plain tensor")
    if value.device.type != "cpu" or value.layout != torch.strided:
        raise ValueError(f"{what} is a tensor on device {value.device.type} with layout {value.layout}")
    if str(value.dtype) not in _ENCODED_DTYPES:
        raise ValueError(f"{what} has dtype {value.dtype}")
    if value.numel() > MAX_ELEMENTS:
        raise ValueError(f"{what} has {value.numel()} elements")
    return value.contiguous()


def _short_text(value, what: str, limit: int = 4000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} is not text")
    return value[:limit]


def from_wire(data: bytes, case: Case | None = None) -> Observation:
    """Load an observation sent by the sandbox and check it against the case that was asked.

    The bytes are hostile.  Only the plain layout (:func:`to_wire`) is accepted, parsed as JSON and
    raw bytes, every offset and size checked against the reply; only the fields of an
    observation, with plain CPU tensors of bounded size, are accepted (``ValueError`` otherwise).  A value
    the student's function returned that the judges cannot use (a meta tensor, a complex dtype)
    becomes ``value=None`` with ``value_type`` saying what it was, so it fails its checks as an
    answer instead of breaking the grader.
    """
    if not data.startswith(PLAIN_MAGIC):
        raise ValueError("unreadable observation (not the plain layout)")
    raw = _from_plain(data)
    if not isinstance(raw, dict) or set(raw) != OBSERVATION_FIELDS:
        raise ValueError("the observation does not have the expected fields")
    value, value_type = raw["value"], _short_text(raw["value_type"], "value_type", 200) or "?"
    try:
        value = _checked_tensor(value, "the value")
    except ValueError as exc:
        value, value_type = None, f"unusable tensor: {exc}"
    grads, args_after = raw["grads"], raw["args_after"]
    if not isinstance(grads, dict) or not isinstance(args_after, (list, tuple)):
        raise ValueError("malformed gradients or inputs")
    if case is not None:
        if not set(grads) <= set(case.grad_wrt) or len(args_after) not in (0, len(case.args)):
            raise ValueError("the observation does not answer the case that was asked")
    checked_grads = {}
    for index, grad in grads.items():
        if not isinstance(index, int):
            raise ValueError("malformed gradient index")
        try:
            checked_grads[index] = _checked_tensor(grad, f"the gradient for argument {index}")
        except ValueError:
            checked_grads[index] = None
    checked_args = []
    for index, arg in enumerate(args_after):
        if isinstance(arg, (torch.Tensor, _Unusable)):
            arg = _checked_tensor(arg, f"argument {index} after the call")
        elif arg is not None and not isinstance(arg, (int, float, bool)):
            raise ValueError(f"argument {index} after the call is a {type(arg).__name__}")
        checked_args.append(arg)
    return Observation(value=value, value_type=value_type, error=_short_text(raw["error"], "error"),
                       error_type=_short_text(raw["error_type"], "error_type", 100),
                       grads=checked_grads, grad_error=_short_text(raw["grad_error"], "grad_error"),
                       args_after=tuple(checked_args))
