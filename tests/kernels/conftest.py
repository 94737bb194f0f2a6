"""The kernel tests run in Triton's interpreter on the CPU: TRITON_INTERPRET must be set before triton is imported
anywhere in the process, so it is set here, when pytest collects this folder."""

import os

os.environ["TRITON_INTERPRET"] = "1"
