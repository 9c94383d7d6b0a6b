# Registers the signoff plugin for acceptance/ and tests/.
import importlib.util
import sys

# pyproject.toml's dependencies, by the module they import as. In a bare clone (system python3
# and pytest, nothing installed) the plugin's import would fail on the first of them with
# pytest's traceback of it (rc 3): one line instead, that says how to install, with pytest's
# usage code. SystemExit, not an exception: pytest wraps those in its own traceback.
NEEDS = {"ClusterShell": "ClusterShell", "fabric": "fabric", "yaml": "PyYAML", "pytest_html": "pytest-html",
         "xdist": "pytest-xdist", "matplotlib": "matplotlib", "pynvml": "nvidia-ml-py"}
_missing = [dist for mod, dist in NEEDS.items() if importlib.util.find_spec(mod) is None]
if _missing:
    sys.stderr.write(f"signoff is not installed for {sys.executable} (missing {', '.join(_missing)}): "
                     "run `make accept` in the clone, or `pip install .` into a venv and run its "
                     "pytest (README: Quickstart)\n")
    raise SystemExit(4)

pytest_plugins = ["signoff.plugin"]
