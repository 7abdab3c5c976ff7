"""The pipe protocol between the grader (:mod:`sandbox`) and the sandbox's supervisor
(:mod:`sandbox_runner`): both sides import it, so the two can never disagree.

A frame is an 8-byte little-endian length and a payload; every payload starts with a one-byte kind.
Requests (grader -> sandbox): the job (JSON: the set-up cell, the answer cells, the notebook and the
caps), then ``feedback``, ``define`` and any number of ``call`` requests (a call's body is plain data
from :func:`rlhf_course.grading.sandbox.observe.encode_call`, relayed to the child untouched).  Replies
(sandbox -> grader): ``ready``, ``defined`` (JSON: the cells that raised), ``observation`` (the plain
layout of :func:`rlhf_course.grading.sandbox.observe.to_wire`), ``notebook`` (the executed notebook's JSON) or
``failed`` (a short reason).  Nothing here imports torch.
"""
from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct("<Q")
# request kinds
JOB, FEEDBACK, DEFINE, CALL = b"J", b"B", b"E", b"C"
# reply kinds
READY, DEFINED, OBSERVATION, NOTEBOOK, FAILED = b"R", b"D", b"O", b"N", b"F"
PIPELINE_BYTES = 32 * 1024  # call requests in flight (frames with headers); a pipe holds 64 KiB
JOB_FIELDS = {"setup": str, "answer_cells": dict, "notebook_name": str, "notebook_json": str,
              "notebook_cap": int, "reply_cap": int}


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def write_frame(fd: int, payload: bytes) -> None:
    data = frame(payload)
    while data:
        data = data[os.write(fd, data):]


def read_frame(fd: int, cap: int = 1 << 40) -> bytes | None:
    """The next frame's payload from ``fd`` (None at end of file); ``ValueError`` above ``cap``."""
    header = _read_exactly(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > cap:
        raise ValueError(f"frame of {size} bytes (cap {cap})")
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def job_request(job: dict) -> bytes:
    """The job as plain JSON: no unpickler ever reads it."""
    return JOB + json.dumps(job).encode()


def decode_job(body: bytes) -> dict:
    job = json.loads(body)
    if not isinstance(job, dict) or set(job) != set(JOB_FIELDS) or not all(
            isinstance(job[name], kind) for name, kind in JOB_FIELDS.items()):
        raise ValueError("malformed job")
    return job


def defined_reply(errors: dict[str, str]) -> bytes:
    return DEFINED + json.dumps(errors).encode()


def decode_defined(body: bytes) -> dict[str, str]:
    """The definition report: cell id -> the error it raised (``ValueError`` if malformed)."""
    errors = json.loads(body)
    if not isinstance(errors, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in errors.items()):
        raise ValueError("malformed definition report")
    return errors
