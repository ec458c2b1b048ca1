#!/usr/bin/env python3
"""Bounded CUDA validation probe: one self-contained file, standard library only.

`nvidia-smi -L` confirms device visibility only. This probe runs real CUDA work through the driver's
libcuda.so.1 with ctypes (no CUDA toolkit, PyTorch or numpy), so it can be shipped in a ConfigMap and run
as `python3 cuda_probe.py` in any image with python3 (3.8+) where the container toolkit injected the
driver libraries. Within a fixed time budget it:

1. creates a context, writes a random pattern to device memory, reads it back and verifies it, also
   after a device-to-device copy;
2. measures device-memory bandwidth with timed cuMemcpyDtoDAsync copies between two large buffers,
   counting 2 x bytes per copy (each byte is read once and written once), and compares the median with
   the vendor's published figure for the detected model;
3. JIT-loads a saxpy kernel from PTX embedded below, launches it over a few million elements and checks
   every result on the host.

It prints exactly one JSON line on stdout. Exit codes: 0 pass; 1 a check failed or the bandwidth ratio
is below --min-bandwidth-ratio; 2 cannot run (no driver library, no device, bad arguments); 3 the
time budget ran out (a watchdog thread ends the process, so the probe never overruns its budget);
143 terminated by SIGTERM. Published figures are vendor specifications, not measurements of this host.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import statistics
import struct
import sys
import threading
import time
from array import array
from typing import Any, NoReturn

STARTED = time.monotonic()

PROBE_NAME = "eks-hybrid-gpu-cuda-probe"
PROBE_VERSION = 1
DEFAULT_BUDGET_SECONDS = 20.0
MAX_BUDGET_SECONDS = 100.0
"""Hard cap, below the smoke Job's activeDeadlineSeconds of 120."""
DEFAULT_MIN_BANDWIDTH_RATIO = 0.5
DEFAULT_BUFFER_MIB = 2048
DEFAULT_ITERATIONS = 20
WARMUP_COPIES = 3
MIN_ITERATIONS = 3
PATTERN_BYTES = 64 << 20
KERNEL_ELEMENTS = 1 << 22
KERNEL_A = 3.0
THREADS_PER_BLOCK = 256
MEMSET_WORD = 0x5AA5C33C
BANDWIDTH_SHARE_OF_REMAINING = 0.3
"""At most this share of the remaining budget goes to timed copies, leaving room for the kernel check."""

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_CANNOT_RUN = 2
EXIT_TIMEOUT = 3
EXIT_TERMINATED = 143

PUBLISHED_BANDWIDTH: tuple[tuple[str, float, str], ...] = (
    # (regex on the lower-cased device name, TB/s, model as the datasheet names it). Order matters.
    (r"\bh200\b", 4.8, "H200 SXM / H200 NVL (141 GB HBM3e)"),
    (r"\bh100 nvl\b", 3.9, "H100 NVL (94 GB HBM3)"),
    (r"\bh100 pcie\b", 2.0, "H100 PCIe (80 GB HBM2e)"),
    (r"\bh100\b.*\b(hbm3|sxm)", 3.35, "H100 SXM (80 GB HBM3)"),
    (r"\ba100-sxm4-80gb\b", 2.039, "A100 80GB SXM (HBM2e)"),
    (r"\ba100-sxm4-40gb\b", 1.555, "A100 40GB SXM (HBM2)"),
    (r"\ba100 80gb pcie\b", 1.935, "A100 80GB PCIe (HBM2e)"),
    (r"\ba100-pcie-40gb\b", 1.555, "A100 40GB PCIe (HBM2)"),
    (r"\bl40s\b", 0.864, "L40S (48 GB GDDR6)"),
    (r"\bl40\b", 0.864, "L40 (48 GB GDDR6)"),
    (r"\ba10g\b", 0.6, "A10G (24 GB GDDR6)"),
    (r"\ba10\b", 0.6, "A10 (24 GB GDDR6)"),
    (r"\bl4\b", 0.3, "L4 (24 GB GDDR6)"),
    (r"\bt4\b", 0.32, "T4 (16 GB GDDR6)"),
)
"""Vendor datasheet memory bandwidth (1 TB/s = 10**12 bytes/s). H100/H200 SXM are the guide's figures."""

SAXPY_PTX_BODY = r"""
.visible .entry saxpy(
    .param .u64 saxpy_param_y,
    .param .u64 saxpy_param_x,
    .param .f32 saxpy_param_a,
    .param .u32 saxpy_param_n
)
{
    .reg .pred %p<2>;
    .reg .f32 %f<5>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [saxpy_param_y];
    ld.param.u64 %rd2, [saxpy_param_x];
    ld.param.f32 %f1, [saxpy_param_a];
    ld.param.u32 %r2, [saxpy_param_n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra $L__done;
    cvta.to.global.u64 %rd3, %rd2;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.f32 %f2, [%rd5];
    cvta.to.global.u64 %rd6, %rd1;
    add.s64 %rd7, %rd6, %rd4;
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
$L__done:
    ret;
}
"""
PTX_HEADERS: tuple[tuple[str, str], ...] = (("6.0", "sm_50"), ("7.0", "sm_75"))
"""Tried in order: the oldest header any current driver JITs, then one for drivers that dropped sm_5x."""

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_STREAM_NON_BLOCKING = 1
CANNOT_RUN_PHASES = frozenset({"arguments", "load-driver", "init", "device", "context"})


# ----------------------------------------------------------------------------- pure logic (unit-tested)


def published_bandwidth(device_name: str) -> tuple[float, str] | None:
    """Return (TB/s, datasheet model) for a device name as the driver reports it, or None."""
    name = " ".join(device_name.lower().split())
    for pattern, tbps, model in PUBLISHED_BANDWIDTH:
        if re.search(pattern, name):
            return tbps, model
    return None


def effective_budget(requested: float) -> tuple[float, bool]:
    """Clamp the budget to the hard cap; return (seconds, whether it was capped)."""
    if not requested > 0:
        msg = f"--budget-seconds must be positive, got {requested}"
        raise ValueError(msg)
    if requested > MAX_BUDGET_SECONDS:
        return MAX_BUDGET_SECONDS, True
    return requested, False


def bandwidth_tbps(bytes_per_copy: int, milliseconds: float) -> float:
    """Return TB/s for one copy, counting each byte read and written (2 x bytes)."""
    return 2.0 * bytes_per_copy / (milliseconds / 1000.0) / 1e12


def summarise_copies(bytes_per_copy: int, times_ms: list[float]) -> dict[str, float]:
    """Best, median and mean bandwidth over per-copy times."""
    return {
        "bestMs": round(min(times_ms), 4),
        "medianMs": round(statistics.median(times_ms), 4),
        "bestTBps": round(bandwidth_tbps(bytes_per_copy, min(times_ms)), 4),
        "medianTBps": round(bandwidth_tbps(bytes_per_copy, statistics.median(times_ms)), 4),
        "meanTBps": round(bandwidth_tbps(bytes_per_copy, statistics.fmean(times_ms)), 4),
    }


def bandwidth_verdict(
    median_tbps: float, published: tuple[float, str] | None, min_ratio: float
) -> tuple[dict[str, Any], str | None]:
    """Compare the median with the published figure; return (fields, failure or None).

    The median, not the best copy, is judged, so one lucky sample cannot pass a slow device.
    """
    if published is None:
        return {"publishedTBps": None, "publishedModel": None, "ratioToPublished": None}, None
    tbps, model = published
    ratio = round(median_tbps / tbps, 4)
    fields = {"publishedTBps": tbps, "publishedModel": model, "ratioToPublished": ratio}
    if ratio < min_ratio:
        failure = (
            f"median device-to-device bandwidth {median_tbps:.3f} TB/s is {ratio:.2f} of the published "
            f"{tbps} TB/s for {model}, below --min-bandwidth-ratio {min_ratio}"
        )
        return fields, failure
    return fields, None


def plan_iterations(requested: int, copy_ms: float, remaining_s: float) -> int:
    """Fit the timed copies into a share of the remaining budget, never below MIN_ITERATIONS."""
    affordable = int(BANDWIDTH_SHARE_OF_REMAINING * remaining_s * 1000.0 / max(copy_ms, 1e-3))
    return max(MIN_ITERATIONS, min(requested, affordable))


def buffer_bytes(requested_mib: int, free_bytes: int) -> int:
    """Two copy buffers may take at most 80% of free memory; round down to whole MiB."""
    limit = int(free_bytes * 0.4) >> 20
    return max(1, min(requested_mib, limit)) << 20


def exit_code_for(status: str) -> int:
    """Map a result status to the process exit code."""
    return {
        "pass": EXIT_PASS,
        "fail": EXIT_FAIL,
        "error": EXIT_CANNOT_RUN,
        "timeout": EXIT_TIMEOUT,
        "terminated": EXIT_TERMINATED,
    }[status]


def new_result(budget: float, capped: bool, min_ratio: float) -> dict[str, Any]:
    """Return the result document with every key present, so consumers can rely on its shape."""
    return {
        "probe": PROBE_NAME,
        "probeVersion": PROBE_VERSION,
        "status": "error",
        "exitCode": EXIT_CANNOT_RUN,
        "phase": "arguments",
        "budgetSeconds": budget,
        "budgetCapped": capped,
        "elapsedSeconds": None,
        "device": None,
        "memoryCheck": None,
        "bandwidth": None,
        "kernel": None,
        "minBandwidthRatio": min_ratio,
        "failures": [],
        "note": "Published figures are vendor specifications; the measurement is this host's.",
    }


def finish(result: dict[str, Any]) -> dict[str, Any]:
    """Set status and exit code from the failures, when the run reached its end."""
    result["status"] = "fail" if result["failures"] else "pass"
    result["exitCode"] = exit_code_for(result["status"])
    result["phase"] = "done"
    return result


# ----------------------------------------------------------------------------- output and watchdog


class Reporter:
    """Prints exactly one JSON line, from the main thread, the watchdog or a signal handler."""

    def __init__(self, result: dict[str, Any], stream: Any = None) -> None:
        """Keep the result that every path reports."""
        self.result = result
        self.stream = stream if stream is not None else sys.stdout
        self._lock = threading.RLock()
        self._done = False

    def emit(self, status: str | None = None, failure: str | None = None) -> bool:
        """Print the result once, after setting status and failure; False when already printed."""
        with self._lock:
            if self._done:
                return False
            self._done = True
            if status is not None:
                self.result["status"] = status
                self.result["exitCode"] = exit_code_for(status)
            if failure is not None:
                self.result["failures"].append(failure)
            self.result["elapsedSeconds"] = round(time.monotonic() - STARTED, 3)
            self.stream.write(json.dumps(self.result, separators=(",", ":")) + "\n")
            self.stream.flush()
            return True

    def abort(self, status: str, failure: str) -> None:
        """Report and end the process at once, even while CUDA calls are in flight.

        When the main thread already printed its result, it is about to exit itself: do nothing.
        """
        if self.emit(status, failure):
            os._exit(exit_code_for(status))


def start_watchdog(reporter: Reporter, budget: float) -> threading.Timer:
    """End the process when the budget runs out; ctypes releases the GIL, so the timer fires."""

    def expire() -> None:
        phase = reporter.result["phase"]
        reporter.abort("timeout", f"time budget of {budget} s ran out during {phase}")

    timer = threading.Timer(max(0.0, budget - (time.monotonic() - STARTED)), expire)
    timer.daemon = True
    timer.start()
    return timer


# ----------------------------------------------------------------------------- driver API


class CudaError(RuntimeError):
    """A driver API call that did not return CUDA_SUCCESS."""


_c_ptr = ctypes.POINTER
_SIGNATURES: dict[str, tuple[Any, ...]] = {
    "cuInit": (ctypes.c_uint,),
    "cuDriverGetVersion": (_c_ptr(ctypes.c_int),),
    "cuDeviceGetCount": (_c_ptr(ctypes.c_int),),
    "cuDeviceGet": (_c_ptr(ctypes.c_int), ctypes.c_int),
    "cuDeviceGetName": (ctypes.c_void_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceGetAttribute": (_c_ptr(ctypes.c_int), ctypes.c_int, ctypes.c_int),
    "cuDeviceTotalMem_v2": (_c_ptr(ctypes.c_size_t), ctypes.c_int),
    "cuDeviceGetUuid_v2": (ctypes.c_void_p, ctypes.c_int),
    "cuDeviceGetUuid": (ctypes.c_void_p, ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (_c_ptr(ctypes.c_void_p), ctypes.c_int),
    "cuDevicePrimaryCtxRelease_v2": (ctypes.c_int,),
    "cuDevicePrimaryCtxRelease": (ctypes.c_int,),
    "cuCtxSetCurrent": (ctypes.c_void_p,),
    "cuCtxSynchronize": (),
    "cuMemGetInfo_v2": (_c_ptr(ctypes.c_size_t), _c_ptr(ctypes.c_size_t)),
    "cuMemAlloc_v2": (_c_ptr(ctypes.c_uint64), ctypes.c_size_t),
    "cuMemFree_v2": (ctypes.c_uint64,),
    "cuMemcpyHtoD_v2": (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t),
    "cuMemcpyDtoH_v2": (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t),
    "cuMemcpyDtoDAsync_v2": (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p),
    "cuMemsetD32_v2": (ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t),
    "cuStreamCreate": (_c_ptr(ctypes.c_void_p), ctypes.c_uint),
    "cuStreamSynchronize": (ctypes.c_void_p,),
    "cuStreamDestroy_v2": (ctypes.c_void_p,),
    "cuEventCreate": (_c_ptr(ctypes.c_void_p), ctypes.c_uint),
    "cuEventRecord": (ctypes.c_void_p, ctypes.c_void_p),
    "cuEventSynchronize": (ctypes.c_void_p,),
    "cuEventElapsedTime_v2": (_c_ptr(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p),
    "cuEventElapsedTime": (_c_ptr(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p),
    "cuEventDestroy_v2": (ctypes.c_void_p,),
    "cuModuleLoadData": (_c_ptr(ctypes.c_void_p), ctypes.c_char_p),
    "cuModuleGetFunction": (_c_ptr(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p),
    "cuModuleUnload": (ctypes.c_void_p,),
    "cuLaunchKernel": (
        ctypes.c_void_p,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        _c_ptr(ctypes.c_void_p),
        _c_ptr(ctypes.c_void_p),
    ),
    "cuGetErrorName": (ctypes.c_int, _c_ptr(ctypes.c_char_p)),
}


class Driver:
    """Typed access to the few libcuda entry points the probe uses."""

    def __init__(self, library: str) -> None:
        """Load libcuda; ctypes.CDLL releases the GIL during calls, which the watchdog relies on."""
        self.lib = ctypes.CDLL(library)
        self._functions: dict[str, Any] = {}

    def function(self, *names: str) -> Any:
        """Return the first exported entry point among names (newer ABI versions first)."""
        for name in names:
            if name in self._functions:
                return self._functions[name]
            found = getattr(self.lib, name, None)
            if found is not None:
                found.argtypes = _SIGNATURES[name]
                found.restype = ctypes.c_int
                self._functions[name] = found
                return found
        msg = f"libcuda exports none of {', '.join(names)}: the driver is too old for this probe"
        raise CudaError(msg)

    def error_name(self, code: int) -> str:
        """Return e.g. CUDA_ERROR_OUT_OF_MEMORY for a result code."""
        name = ctypes.c_char_p()
        if self.function("cuGetErrorName")(code, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return f"CUDA error {code}"

    def call(self, *names_and_args: Any) -> None:
        """Call an entry point, given as a name or a tuple of names, and raise on failure."""
        names = names_and_args[0] if isinstance(names_and_args[0], tuple) else (names_and_args[0],)
        code = self.function(*names)(*names_and_args[1:])
        if code != 0:
            msg = f"{names[0]} failed: {self.error_name(code)} ({code})"
            raise CudaError(msg)


class Probe:
    """One run against one device, in phases, recording into the result document."""

    def __init__(self, driver: Driver, args: argparse.Namespace, result: dict[str, Any], budget: float):
        """Remember what the run needs; nothing touches the GPU yet."""
        self.cu = driver
        self.args = args
        self.result = result
        self.budget = budget
        self.stream = ctypes.c_void_p()
        self.allocations: list[int] = []
        self.events: list[ctypes.c_void_p] = []
        self.context_device: int | None = None
        self.module = ctypes.c_void_p()

    def phase(self, name: str) -> None:
        """Record the phase, so a failure or timeout names where it happened."""
        self.result["phase"] = name

    def remaining(self) -> float:
        """Return the seconds left in the budget."""
        return self.budget - (time.monotonic() - STARTED)

    def alloc(self, size: int) -> int:
        """Allocate plain device memory (cuMemAlloc, not managed memory)."""
        pointer = ctypes.c_uint64()
        self.cu.call("cuMemAlloc_v2", ctypes.byref(pointer), size)
        self.allocations.append(pointer.value)
        return pointer.value

    def event(self) -> ctypes.c_void_p:
        """Create a timing event."""
        handle = ctypes.c_void_p()
        self.cu.call("cuEventCreate", ctypes.byref(handle), 0)
        self.events.append(handle)
        return handle

    def elapsed_ms(self, start: ctypes.c_void_p, end: ctypes.c_void_p) -> float:
        """Return the milliseconds between two recorded events."""
        value = ctypes.c_float()
        self.cu.call(("cuEventElapsedTime_v2", "cuEventElapsedTime"), ctypes.byref(value), start, end)
        return float(value.value)

    def open(self) -> None:
        """Initialise the driver, pick the device and make its primary context current."""
        self.phase("init")
        self.cu.call("cuInit", 0)
        version = ctypes.c_int()
        self.cu.call("cuDriverGetVersion", ctypes.byref(version))
        self.phase("device")
        count = ctypes.c_int()
        self.cu.call("cuDeviceGetCount", ctypes.byref(count))
        if self.args.device >= count.value:
            msg = f"device {self.args.device} requested but the driver sees {count.value} device(s)"
            raise CudaError(msg)
        device = ctypes.c_int()
        self.cu.call("cuDeviceGet", ctypes.byref(device), self.args.device)
        self.result["device"] = self.describe(device.value, version.value)
        self.phase("context")
        context = ctypes.c_void_p()
        self.cu.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device.value)
        self.context_device = device.value
        self.cu.call("cuCtxSetCurrent", context)
        self.cu.call("cuStreamCreate", ctypes.byref(self.stream), CU_STREAM_NON_BLOCKING)

    def describe(self, device: int, driver_version: int) -> dict[str, Any]:
        """Name, UUID, compute capability and memory of the device."""
        name = ctypes.create_string_buffer(256)
        self.cu.call("cuDeviceGetName", name, 256, device)
        raw = ctypes.create_string_buffer(16)
        self.cu.call(("cuDeviceGetUuid_v2", "cuDeviceGetUuid"), raw, device)
        hexed = raw.raw.hex()
        uuid = f"GPU-{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
        attributes = {}
        for key, attribute in (
            ("major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            ("minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
            ("sms", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        ):
            value = ctypes.c_int()
            self.cu.call("cuDeviceGetAttribute", ctypes.byref(value), attribute, device)
            attributes[key] = value.value
        total = ctypes.c_size_t()
        self.cu.call("cuDeviceTotalMem_v2", ctypes.byref(total), device)
        return {
            "index": self.args.device,
            "name": name.value.decode(errors="replace"),
            "uuid": uuid,
            "computeCapability": f"{attributes['major']}.{attributes['minor']}",
            "multiprocessors": attributes["sms"],
            "memoryMiB": total.value >> 20,
            "cudaDriverApi": f"{driver_version // 1000}.{driver_version % 1000 // 10}",
            "visibleDevices": os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("NVIDIA_VISIBLE_DEVICES")),
        }

    def memory_check(self) -> None:
        """Write a random pattern, read it back, copy it on the device and read the copy back."""
        self.phase("memory-pattern")
        pattern = os.urandom(PATTERN_BYTES)
        first, second = self.alloc(PATTERN_BYTES), self.alloc(PATTERN_BYTES)
        self.cu.call("cuMemcpyHtoD_v2", first, pattern, PATTERN_BYTES)
        readback = ctypes.create_string_buffer(PATTERN_BYTES)
        self.cu.call("cuMemcpyDtoH_v2", readback, first, PATTERN_BYTES)
        host_ok = readback.raw == pattern
        self.cu.call("cuMemcpyDtoDAsync_v2", second, first, PATTERN_BYTES, self.stream)
        self.cu.call("cuStreamSynchronize", self.stream)
        ctypes.memset(readback, 0, PATTERN_BYTES)
        self.cu.call("cuMemcpyDtoH_v2", readback, second, PATTERN_BYTES)
        device_ok = readback.raw == pattern
        self.result["memoryCheck"] = {
            "bytes": PATTERN_BYTES,
            "hostRoundTrip": host_ok,
            "deviceCopy": device_ok,
            "ok": host_ok and device_ok,
        }
        if not host_ok:
            self.result["failures"].append("device memory did not return the pattern written to it")
        if not device_ok:
            self.result["failures"].append("a device-to-device copy did not reproduce the pattern")

    def bandwidth(self) -> None:
        """Time device-to-device copies between two large buffers with events on one stream."""
        self.phase("bandwidth")
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.cu.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        size = buffer_bytes(self.args.buffer_mib, free.value)
        source, destination = self.alloc(size), self.alloc(size)
        self.cu.call("cuMemsetD32_v2", source, MEMSET_WORD, size // 4)
        self.cu.call("cuMemsetD32_v2", destination, 0, size // 4)
        start, end = self.event(), self.event()
        self.cu.call("cuEventRecord", start, self.stream)
        for _ in range(WARMUP_COPIES):
            self.cu.call("cuMemcpyDtoDAsync_v2", destination, source, size, self.stream)
        self.cu.call("cuEventRecord", end, self.stream)
        self.cu.call("cuEventSynchronize", end)
        warm_ms = self.elapsed_ms(start, end) / WARMUP_COPIES
        iterations = plan_iterations(self.args.iterations, warm_ms, self.remaining())
        marks = [self.event() for _ in range(2 * iterations)]
        for index in range(iterations):
            self.cu.call("cuEventRecord", marks[2 * index], self.stream)
            self.cu.call("cuMemcpyDtoDAsync_v2", destination, source, size, self.stream)
            self.cu.call("cuEventRecord", marks[2 * index + 1], self.stream)
        self.cu.call("cuEventSynchronize", marks[-1])
        times = [self.elapsed_ms(marks[2 * i], marks[2 * i + 1]) for i in range(iterations)]
        verified = self.copy_landed(destination, size)
        summary = summarise_copies(size, times)
        fields, failure = bandwidth_verdict(summary["medianTBps"], self.published(), self.args.min_bandwidth_ratio)
        self.result["bandwidth"] = {
            "method": "cuMemcpyDtoDAsync",
            "bufferBytes": size,
            "bytesCountedPerCopy": 2 * size,
            "warmupCopies": WARMUP_COPIES,
            "iterations": iterations,
            **summary,
            **fields,
            "judged": "median",
            "resultVerified": verified,
        }
        if not verified:
            self.result["failures"].append("the timed copies did not leave the source pattern in the target")
        if failure is not None:
            self.result["failures"].append(failure)

    def published(self) -> tuple[float, str] | None:
        """Return the figure for this model, or the one given with --published-tbps."""
        if self.args.published_tbps is not None:
            return float(self.args.published_tbps), "given with --published-tbps"
        return published_bandwidth(self.result["device"]["name"])

    def copy_landed(self, destination: int, size: int) -> bool:
        """Check the start, middle and end of the copy target against the memset word."""
        sample = min(size, 1 << 20)
        expected = struct.pack("<I", MEMSET_WORD) * (sample // 4)
        readback = ctypes.create_string_buffer(sample)
        for offset in (0, (size // 2) & ~0xFFF, size - sample):
            self.cu.call("cuMemcpyDtoH_v2", readback, destination + offset, sample)
            if readback.raw != expected:
                return False
        return True

    def kernel(self) -> None:
        """JIT-load the embedded saxpy PTX, run it and check every element on the host."""
        self.phase("kernel-load")
        loaded, errors = "", []
        for version, target in PTX_HEADERS:
            source = f".version {version}\n.target {target}\n.address_size 64\n{SAXPY_PTX_BODY}\0"
            try:
                self.cu.call("cuModuleLoadData", ctypes.byref(self.module), source.encode())
            except CudaError as error:
                errors.append(f"{target}: {error}")
                continue
            loaded = target
            break
        if not loaded:
            msg = "the driver could not JIT the embedded PTX: " + "; ".join(errors)
            raise CudaError(msg)
        function = ctypes.c_void_p()
        self.cu.call("cuModuleGetFunction", ctypes.byref(function), self.module, b"saxpy")
        self.phase("kernel-run")
        n = KERNEL_ELEMENTS
        x = array("f", range(n))
        y = array("f", range(n, 0, -1))
        expected = array("f", range(n, 3 * n, 2))  # 3*i + (n - i) = n + 2i, exact in float32
        nbytes = n * x.itemsize
        device_x, device_y = self.alloc(nbytes), self.alloc(nbytes)
        self.cu.call("cuMemcpyHtoD_v2", device_x, x.buffer_info()[0], nbytes)
        self.cu.call("cuMemcpyHtoD_v2", device_y, y.buffer_info()[0], nbytes)
        arguments = (ctypes.c_uint64(device_y), ctypes.c_uint64(device_x), ctypes.c_float(KERNEL_A))
        count = ctypes.c_uint32(n)
        pointers = (ctypes.c_void_p * 4)(*[ctypes.addressof(a) for a in (*arguments, count)])
        start, end = self.event(), self.event()
        blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        self.cu.call("cuEventRecord", start, self.stream)
        self.cu.call("cuLaunchKernel", function, blocks, 1, 1, THREADS_PER_BLOCK, 1, 1, 0, self.stream, pointers, None)
        self.cu.call("cuEventRecord", end, self.stream)
        self.cu.call("cuEventSynchronize", end)
        result = array("f", bytes(nbytes))
        self.cu.call("cuMemcpyDtoH_v2", result.buffer_info()[0], device_y, nbytes)
        same = result.tobytes() == expected.tobytes()
        mismatches = 0 if same else sum(1 for i in range(n) if result[i] != expected[i])
        self.result["kernel"] = {
            "name": "saxpy",
            "ptxTarget": loaded,
            "elements": n,
            "ms": round(self.elapsed_ms(start, end), 4),
            "mismatches": mismatches,
            "ok": mismatches == 0,
        }
        if mismatches:
            self.result["failures"].append(f"saxpy produced {mismatches} wrong element(s) out of {n}")

    def close(self) -> None:
        """Release what the run took; errors here do not change the verdict."""
        calls: list[tuple[Any, ...]] = [("cuMemFree_v2", pointer) for pointer in self.allocations]
        calls += [("cuEventDestroy_v2", handle) for handle in self.events]
        if self.module.value:
            calls.append(("cuModuleUnload", self.module))
        if self.stream.value:
            calls.append(("cuStreamDestroy_v2", self.stream))
        if self.context_device is not None:
            release = ("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
            calls.append((release, self.context_device))
        for call in calls:
            try:
                self.cu.call(*call)
            except CudaError:
                continue


# ----------------------------------------------------------------------------- command line


class _ArgumentError(Exception):
    """A bad command line, reported as a JSON line rather than argparse's usage text."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _ArgumentError(message)


def build_parser() -> argparse.ArgumentParser:
    """Describe the command line."""
    parser = _Parser(prog="cuda_probe.py", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--budget-seconds",
        type=float,
        default=DEFAULT_BUDGET_SECONDS,
        help=f"seconds (default {DEFAULT_BUDGET_SECONDS:g}, capped at {MAX_BUDGET_SECONDS:g})",
    )
    parser.add_argument(
        "--min-bandwidth-ratio",
        type=float,
        default=DEFAULT_MIN_BANDWIDTH_RATIO,
        help="fail below this share of the published bandwidth (default %(default)s)",
    )
    parser.add_argument(
        "--buffer-mib",
        type=int,
        default=DEFAULT_BUFFER_MIB,
        help="size of each copy buffer in MiB (default %(default)s)",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help="timed copies, fewer when the budget is short (default %(default)s)",
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    parser.add_argument(
        "--published-tbps",
        type=float,
        default=None,
        help="published bandwidth for a model the probe does not know",
    )
    parser.add_argument("--libcuda", default="libcuda.so.1", help="driver library (default %(default)s)")
    return parser


def run(argv: list[str] | None = None, stream: Any = None) -> int:
    """Run the probe and return its exit code; exactly one JSON line is printed."""
    # The budget counts from this run, not from the import: a process that imported the module long ago
    # (a test runner, a caller's own tooling) must not find its budget already spent.
    global STARTED
    STARTED = time.monotonic()
    result = new_result(DEFAULT_BUDGET_SECONDS, False, DEFAULT_MIN_BANDWIDTH_RATIO)
    reporter = Reporter(result, stream)
    try:
        args = build_parser().parse_args(argv)
        budget, capped = effective_budget(args.budget_seconds)
        if args.buffer_mib < 1 or args.iterations < 1 or args.device < 0:
            msg = "--buffer-mib, --iterations must be at least 1 and --device at least 0"
            raise _ArgumentError(msg)
    except (_ArgumentError, ValueError) as error:
        result["failures"].append(f"bad arguments: {error}")
        reporter.emit()
        return EXIT_CANNOT_RUN
    result.update(budgetSeconds=budget, budgetCapped=capped, minBandwidthRatio=args.min_bandwidth_ratio)
    timer = start_watchdog(reporter, budget)
    previous = signal.signal(signal.SIGTERM, lambda *_: reporter.abort("terminated", "received SIGTERM"))
    probe: Probe | None = None
    try:
        result["phase"] = "load-driver"
        try:
            driver = Driver(args.libcuda)
        except OSError as error:
            msg = (
                f"{args.libcuda} could not be loaded ({error}): the container has no NVIDIA driver "
                "libraries; run it with the nvidia RuntimeClass (device plugin) or a DRA claim so the "
                "container toolkit injects them"
            )
            raise CudaError(msg) from error
        probe = Probe(driver, args, result, budget)
        probe.open()
        probe.memory_check()
        probe.bandwidth()
        probe.kernel()
        finish(result)
    except CudaError as error:
        result["failures"].append(str(error))
        result["status"] = "error" if result["phase"] in CANNOT_RUN_PHASES else "fail"
        result["exitCode"] = exit_code_for(result["status"])
    finally:
        if probe is not None:
            probe.close()
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)
    reporter.emit()
    return int(result["exitCode"])


if __name__ == "__main__":
    sys.exit(run())
