"""Which environment variables hold secrets: the one rule, with no imports.

Kept apart from :mod:`tui.domain.flags.secrets` (which needs the run record) because the server's
log relay must start in milliseconds and imports only the standard library and this.
"""

from __future__ import annotations

import re

#: An environment variable whose name matches holds a secret (``VLLM_API_KEY``,
#: ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``...). Deliberately broad: treating a harmless
#: variable as a secret costs a reference in an export; the reverse leaks a key.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
#: Shorter values ("1", "true") would redact ordinary text from logs.
MIN_SECRET_LEN = 6
