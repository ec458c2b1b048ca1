"""The bounded CUDA validation probe, shipped to the GPU as one standard-library file.

The smoke-Job component reads the file's text into a ConfigMap and runs `python3 cuda_probe.py` in the
Job's container, so the probe needs nothing but python3 and the driver libraries that the container
toolkit injects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

PROBE_FILENAME: Final = "cuda_probe.py"


def probe_script_path() -> Path:
    """Return the path of cuda_probe.py, whose text goes into the smoke Job's ConfigMap."""
    return Path(__file__).with_name(PROBE_FILENAME)
