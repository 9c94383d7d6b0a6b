# The two commands: `make accept` (sign off a cluster) and `make test` (the suite's own tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= auto
INVENTORY ?=
HOSTS ?=
ARGS ?=
SYSTEM_PKGS := openssh-server fio iperf3 iproute2 python3 procps slurmctld slurmd slurm-client munge
SYSTEM_PKGS += chromium poppler-utils  # the report's headless-browser and PDF tests
SYSTEM_PKGS += gcc libc6-dev  # the storage lab's fake corrupting disk (no device-mapper here)

HOST_OPTS := $(if $(INVENTORY),--inventory $(INVENTORY),) $(if $(HOSTS),--hosts $(HOSTS),)

.PHONY: accept test venv system lint clean

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# no torch: the controller needs none; probes run in the training environment (--python)
	$(PY) -m pip install -q -e .
	touch $@

# signoff's own probe environment (torch pinned: an unpinned torch pulls a multi-GB CUDA
# build): `make accept` on a machine whose python3 has no torch, and the suite's own tests
# (gloo all-reduce, the soak loop). Every report says when a run's probes used it.
$(VENV)/.installed-probe: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[probe]'
	touch $@

# dev tools: `make test` and `make lint` only, never a sign-off run
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# Debian packages the lab tests need (real sshd, fio, iperf3, Slurm 22.05 with munge, chromium
# and poppler for the report); needs root.
system:
	@missing=""; for b in /usr/sbin/sshd /usr/bin/fio /usr/bin/iperf3 /usr/sbin/ip /usr/bin/python3 \
	  /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/sbin/munged /usr/bin/chromium /usr/bin/pdftoppm /usr/bin/gcc; do \
	  [ -x $$b ] || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PKGS); fi

# With no host named and no --python, the probes run in the python3 on PATH (this machine's
# training environment); where that has no torch, in signoff's own, built here once.
OWN_ENV := $(if $(INVENTORY)$(HOSTS)$(findstring --python,$(ARGS)),,$(shell \
  python3 -c "import importlib.metadata as m; m.version('torch')" >/dev/null 2>&1 || \
  echo $(VENV)/.installed-probe))

# the installed command (signoff/cli.py): `pytest acceptance/` with these options. make exits 2
# whatever code its recipe failed with (a FAIL's 1 too), so signoff's own code is said last; CI
# calls `signoff run` to get it as the exit status (README: Exit codes).
accept: venv $(OWN_ENV)
	@echo "$(VENV)/bin/signoff run --profile $(PROFILE) $(HOST_OPTS) $(ARGS)"
	@$(VENV)/bin/signoff run --profile $(PROFILE) $(HOST_OPTS) $(ARGS); code=$$?; \
	echo "make accept: signoff exit code $$code (README: Exit codes)$$([ $$code -eq 0 ] || echo \
	  "; make's own exit status is 2 whatever the code: in CI call signoff run, not make accept")"; \
	exit $$code

test: system $(VENV)/.installed-probe $(VENV)/.installed-dev
	# test files in parallel, 3 at once on 2 cores: the lab tests wait on timeouts, links and
	# sleeps, so 2 workers left the CPU 40 % idle (a fresh clone: 897 s of tests at -n 2, 779 s at
	# -n 3, docs/measurements.md); one file's tests stay on one worker, so a module's lab is built
	# once; the longest files first, in tests/conftest.py's order (LONGEST_FIRST)
	$(PY) -m pytest tests/ -q -n 3 --dist loadfile --no-loadscope-reorder $(ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check signoff acceptance tests bench conftest.py

clean:
	rm -rf $(VENV) reports/2*
