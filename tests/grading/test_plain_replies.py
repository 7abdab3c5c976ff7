"""Observations come back from the sandbox in a plain layout (a JSON header and the tensors' raw bytes):
what the student's process writes there is hostile, so every malformed reply must be refused with a
ValueError (the grader's "refused reply"), never crash the grader or come back as something else."""
import json
import struct

import pytest
import torch

from rlhf_course.grading.sandbox.observe import PLAIN_MAGIC, Case, Observation, from_wire, to_wire

CASE = Case((torch.ones(3), torch.ones(3), 0.2), grad_wrt=(0,))


def plain(header: dict, blob: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return PLAIN_MAGIC + struct.pack("<I", len(text)) + text + blob


def fields(**changes) -> dict:
    header = {"value": {"plain": None}, "value_type": "Tensor", "error": None, "error_type": None, "grads": [],
              "grad_error": None,
              "args_after": []}
    header.update(changes)
    return header


def test_every_field_comes_back_exactly():
    observation = Observation(value=torch.tensor([[1.5, -2.0]], dtype=torch.float64), value_type="Tensor",
                              error=None, grads={0: torch.arange(3, dtype=torch.float32)}, grad_error="no grad",
                              args_after=(torch.ones(3), torch.zeros(3, dtype=torch.int64), 0.2))
    back = from_wire(to_wire(observation), CASE)
    assert back.value.dtype == torch.float64 and torch.equal(back.value, observation.value)
    assert torch.equal(back.grads[0], observation.grads[0]) and back.grad_error == "no grad"
    assert [type(a) for a in back.args_after] == [torch.Tensor, torch.Tensor, float]
    assert torch.equal(back.args_after[1], observation.args_after[1]) and back.args_after[2] == 0.2
    empty = from_wire(to_wire(Observation(value=torch.empty(0, 4), args_after=CASE.args)), CASE)
    assert empty.value.shape == (0, 4)
    failed = from_wire(to_wire(Observation(error="ValueError: no")), CASE)
    assert failed.value is None and failed.error == "ValueError: no"


def test_unusable_tensors_come_back_as_words_not_tensors():
    meta = from_wire(to_wire(Observation(value=torch.empty(3, device="meta"), args_after=CASE.args)), CASE)
    assert meta.value is None and "meta" in meta.value_type
    huge = fields(value={"dtype": "torch.float32", "shape": [2**20, 2], "offset": 0, "nbytes": 2**23})
    assert from_wire(plain(huge), CASE).value is None  # never allocated, never read


@pytest.mark.parametrize("reply, why", [
    (PLAIN_MAGIC + b"\x05\x00", "unreadable"),                                       # header length cut short
    (PLAIN_MAGIC + struct.pack("<I", 9) + b"not json!", "unreadable"),
    (plain({"value": {"plain": None}}), "expected fields"),
    (PLAIN_MAGIC + struct.pack("<I", 200_000) + b"[" * 100_000 + b"]" * 100_000, "unreadable"),  # nesting
    (plain(fields(value={"dtype": "torch.float32", "shape": [4], "offset": 0, "nbytes": 16}), b"\0" * 8), "out of range"),
    (plain(fields(value={"dtype": "torch.float32", "shape": [4], "offset": 8, "nbytes": 8}), b"\0" * 16), "out of range"),
    (plain(fields(value={"dtype": "torch.float32", "shape": [2], "offset": -8, "nbytes": 8}), b"\0" * 16), "out of range"),
    (plain(fields(value={"dtype": "torch.complex64", "shape": [1], "offset": 0, "nbytes": 8}), b"\0" * 8), "malformed"),
    (plain(fields(value={"dtype": "torch.float32", "shape": [-1], "offset": 0, "nbytes": 4}), b"\0" * 4), "malformed"),
    (plain(fields(value={"dtype": "torch.float32", "shape": "4", "offset": 0, "nbytes": 16}), b"\0" * 16), "malformed"),
    (plain(fields(value={"plain": {"a": 1}})), "malformed"),
    (plain(fields(grads=[[[0], {"plain": None}]])), "malformed"),                     # an unhashable index
    (plain(fields(grads=[[5, {"plain": None}]])), "does not answer the case"),
    (plain(fields(args_after=[{"plain": "text"}, {"plain": None}, {"plain": 0.2}])), "is a str"),
    (plain(fields(error={"plain": 1})), "not text"),
])
def test_malformed_replies_are_refused(reply, why):
    with pytest.raises(ValueError, match=why):
        from_wire(reply, CASE)
