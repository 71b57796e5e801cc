# Every target sets up its own virtual environment first, so a fresh clone needs only `make`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# torch is pinned for development and CI; where the build machines keep wheels on disk, use them.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
PIP_FLAGS := -q --disable-pip-version-check $(FIND_LINKS) -c constraints.txt
PIP_INSTALL := $(PY) -m pip install $(PIP_FLAGS)
# `make demo` needs only the core package (CartPole is in gymnasium itself), so it gets a
# light environment of its own instead of the development one (ray, transformers, mujoco, ...).
# --no-compile: Python writes bytecode on first import, for the modules the demo uses only
# (precompiling every installed module would add about 140 MB, most of it torch's).
DEMO_VENV ?= .venv-demo
DEMO_PY := $(DEMO_VENV)/bin/python
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: setup setup-demo generate check-generated lint test test-all mutants demo bench bench-peer bench-learning dist-arena clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e ".[dev,server]"
	touch $(STAMP)

setup: $(STAMP)

$(DEMO_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_PY) -m pip install $(PIP_FLAGS) --upgrade pip
	$(DEMO_PY) -m pip install $(PIP_FLAGS) --no-compile -e .
	touch $(DEMO_STAMP)

setup-demo: $(DEMO_STAMP)

generate: setup
	$(PY) -m codegen

check-generated: setup
	$(PY) -m codegen --check

lint: setup
	$(VENV)/bin/ruff check agilerl codegen tests bench tools
	$(VENV)/bin/mypy agilerl codegen tools/mutants.py

# The default suite runs in TEST_WORKERS processes (each test keeps torch to one thread);
# the Ray cluster tests (test_ray_*.py) share one of them, one cluster at a time (tests/conftest.py).
TEST_WORKERS ?= 2

test: setup check-generated
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-all: setup
	$(PY) -m pytest -q -m ""

# Each algorithm's defining line removed in turn (tools/mutants/*.yaml); a test must fail
# for every one (tens of minutes: one run of the entry's tests per line).
mutants: setup
	$(PY) tools/mutants.py

demo: setup-demo
	$(DEMO_PY) -m agilerl.demo

bench: setup
	$(PY) bench/validate_bench.py
	$(PY) bench/env_step_rate.py
	$(PY) bench/train_bench.py
	$(PY) bench/arena_bench.py
	$(PY) bench/hostile_manifest_bench.py
	$(PY) bench/arena_env_bench.py

# Issue 24's speed protocol: every manifest of the speed table at its bench budget, 3 runs of
# each library interleaved (docs/speed.md); then start-up over 5 cold starts.
PEER_MANIFESTS = dqn_cartpole:20000 ppo_cartpole:20000 td3_pendulum:4000 rainbow_cartpole:4000 \
	cqn_cartpole:10000 neural_ts_iris:10000 neural_ucb_iris:10000
PEER_MULTI_AGENT = maddpg_ssl:2000 ippo_spread:4096

bench-peer: setup
	$(PY) bench/peer.py --repeat 3 --manifests $(PEER_MANIFESTS)
	$(PY) bench/peer.py --repeat 3 --manifests $(PEER_MULTI_AGENT) --peer-set network.arch=mlp
	$(PY) bench/startup.py --reference

# Issue 21's learning benchmark: every task, 5 seeds each, the reference beside (hours on 2 cores;
# finished runs are cached under bench/results/learning/, so it resumes where it stopped).
bench-learning: setup
	$(PY) bench/learning.py --reference

# The light `agilerl-arena` wheel (client, `arena` CLI, light models; no torch, no gymnasium).
dist-arena: setup
	$(PY) tools/arena_wheel/build.py --out dist

clean:
	rm -rf $(VENV) $(DEMO_VENV) .pytest_cache .mypy_cache .ruff_cache
