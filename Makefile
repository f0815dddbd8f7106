# ioassess: `make demo` and `make test` work on a fresh Debian machine with Python 3.11 and gcc;
# each installs what it needs.
PYTHON ?= python3
PIP = $(PYTHON) -m pip --disable-pip-version-check
# Debian packages the tests, the demo and the bench use (command or file:package); chromium opens
# the HTML report; autoconf, automake, libtool and zlib build Darshan's runtime
# (tests/darshan_runtime.py); fio runs bench/fio_uncached.py and make validate's workloads;
# btrfs-progs makes the copy-on-write file system of tests/test_recorder_storage.py;
# glusterfs-server (glusterd, gluster) and glusterfs-client (the FUSE client) serve and mount the
# GlusterFS volume of tests/glusterfs.py; java runs PySpark for `ioassess fleet query --engine spark`;
# munge, slurmctld, slurmd and slurm-client (sbatch) run the one-node Slurm of tests/slurm.py, whose
# jobs load the Lmod module.
DEBIAN_TOOLS = sqlite3:sqlite3 git:git gzip:gzip tar:tar sha256sum:coreutils dd:coreutils chromium:chromium \
	mpicc:libmpich-dev mpiexec:mpich useradd:passwd /usr/share/lmod/lmod/libexec/lmod:lmod \
	autoconf:autoconf automake:automake libtoolize:libtool /usr/include/zlib.h:zlib1g-dev \
	fio:fio mkfs.btrfs:btrfs-progs glusterd:glusterfs-server mount.glusterfs:glusterfs-client \
	java:openjdk-17-jre-headless munged:munge slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client

.PHONY: all build install deps pydeps demo check test bench validate clean

all: build

# The recorder into the checkout's package (ioassess/lib), where `pip install -e .` and the tests
# find it.
build:
	$(MAKE) -C plugin OUT=$(CURDIR)/ioassess/lib

deps:
	@missing=""; for pair in $(DEBIAN_TOOLS); do \
	  { command -v $${pair%%:*} || [ -e $${pair%%:*} ]; } >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@$(MAKE) --no-print-directory pydeps

# The Python packages the tests and checks use beyond the package's own (pip, no root needed).
pydeps:
	@$(PYTHON) -c 'import pytest' 2>/dev/null || $(PIP) install --quiet 'pytest>=7'
	@$(PYTHON) -c 'import websocket' 2>/dev/null || $(PIP) install --quiet websocket-client
	@$(PYTHON) -c 'import powerlaw' 2>/dev/null || $(PIP) install --quiet powerlaw
	@$(PYTHON) -c 'import scipy, mpmath' 2>/dev/null || $(PIP) install --quiet 'scipy>=1.10' mpmath
	@$(PYTHON) -c 'import prometheus_client' 2>/dev/null || $(PIP) install --quiet prometheus_client
	@$(PYTHON) -c 'from jsonschema import Draft202012Validator' 2>/dev/null || $(PIP) install --quiet 'jsonschema>=4'
	@$(PYTHON) -c 'import pyarrow' 2>/dev/null || $(PIP) install --quiet pyarrow
	@$(PYTHON) -c 'import duckdb' 2>/dev/null || $(PIP) install --quiet duckdb
	@$(PYTHON) -c 'import pyspark' 2>/dev/null || $(PIP) install --quiet 'pyspark>=3.5'
	@$(PYTHON) -c 'import drishti' 2>/dev/null || $(PIP) install --quiet 'drishti-io==0.8'
	@$(PYTHON) -m ruff --version >/dev/null 2>&1 || $(PIP) install --quiet ruff

# Editable: the installed ioassess is this checkout (Python edits need no reinstall; C edits
# need `make build`).
install: build
	$(PIP) install --quiet -e .

# Runs inside demo-out, which holds the demo's work files and traces.
DEMO_DIR = demo-out
demo: deps install
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)/work
	cd $(DEMO_DIR) && $(PYTHON) -m ioassess run --trace-dir traces -- sh ../demo/workload.sh work
	cd $(DEMO_DIR) && $(PYTHON) -m ioassess show traces
	@echo "the report: $(DEMO_DIR)/traces/report.html"

# The everyday loop, under 2 minutes, with no root, network, MPI or browser: the linter, the C code
# with warnings as errors, and the tests that need none of those (markers in pyproject.toml).
CHECK_TESTS = not (root or mpi or browser or darshan_runtime or slow or glusterfs or spark)
check: pydeps build
	$(PYTHON) -m ruff check .
	$(MAKE) -C tests/progs
	$(PYTHON) -m pytest -q -p no:cacheprovider -m "$(CHECK_TESTS)" tests

# The whole suite (CI).
test: deps install
	$(PYTHON) -m ruff check .
	$(MAKE) -C tests/progs
	$(PYTHON) -m pytest -q tests

bench: deps install
	$(MAKE) -C bench
	$(PYTHON) bench/overhead.py
	$(PYTHON) bench/fio_uncached.py
	$(PYTHON) bench/models_density.py
	$(PYTHON) bench/models_classify.py
	$(PYTHON) bench/report.py
	$(PYTHON) bench/big_jobs.py
	$(PYTHON) bench/tails.py
	$(PYTHON) bench/probe.py
	$(PYTHON) bench/fleet.py
	$(MAKE) -C tests/progs
	$(PYTHON) bench/fdswap.py

# Trains the quick profile and checks it on held-out workloads (minutes; docs/cause-models.md),
# fio's workloads on ext4 and on a GlusterFS volume, and the wall-clock seconds at stake against
# what fixed MPI jobs save (docs/assessment.md).
validate: deps install
	$(PYTHON) bench/validate_models.py
	$(PYTHON) bench/validate_fio.py
	$(PYTHON) bench/validate_fio.py --glusterfs
	$(PYTHON) bench/validate_noise.py
	$(PYTHON) bench/validate_noise.py --glusterfs
	$(MAKE) -C tests/progs
	$(PYTHON) bench/validate_stakes.py

clean:
	$(MAKE) -C plugin clean
	rm -rf build *.egg-info tests/progs/bin bench/out ioassess/lib
