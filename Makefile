# Every target creates .venv from requirements.txt first (once), so each command below works
# on a fresh clone.  nbgrader reads nbgrader_config.py from here and calls alembic from PATH.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(VENV))/bin:$(PATH)
OUT ?= outputs

.PHONY: demo test grade release editions lab lab-instructor hub clean

LABEXTENSION := jupyter/labextension/rlhf-course-deadlines
# A Python too old for the pinned packages is told so (and what to do) before a venv is made that pip would fail in.
$(STAMP): requirements.txt pyproject.toml jupyter/server/rlhf_course.json $(LABEXTENSION)/source-sha256.txt
	$(PYTHON) -m rlhf_course.python_version
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .  # with rlhf-grader, rlhf-classroom
	mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d  # the course's server extension (Formgrader pages)
	cp jupyter/server/rlhf_course.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	rm -rf $(VENV)/share/jupyter/labextensions/rlhf-course-deadlines  # the Assignment List's deadlines (prebuilt)
	cp -r $(LABEXTENSION) $(VENV)/share/jupyter/labextensions/
	touch $@

## The main job: grade the example class in a copy of the course's inputs ($(OUT)/example_class: its own release,
## gradebook and exchange; this course's students, gradebook and grades are never touched), print a summary,
## then train the tiny LM with RLHF on the reference solution, PPO and DPO, then GRPO (figures in $(OUT)/demo),
## and end with the example class's report for the instructor (its path is printed).
demo: $(STAMP)
	$(PY) -m rlhf_course.grading examples --into=$(OUT)/example_class
	$(PY) -m rlhf_course.lab.ppo_dpo source/rlhf/rlhf_building_blocks.ipynb --out $(OUT)/demo
	$(PY) -m rlhf_course.lab.grpo source/grpo/grpo.ipynb --out $(OUT)/demo
	$(PY) -m rlhf_course.grading report rlhf --course-root=$(OUT)/example_class

## The whole test suite, one test file per worker process at a time (TEST_WORKERS=0: all in this process;
## files share no state: sandbox slots, ports and accounts are claimed per run).
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## Trusted batch grading of submitted/: sandboxed (bubblewrap, as root), parallel, into the
## gradebook; then feedback/ and grades.csv.  ASSIGNMENT=name (default: every released one with
## submissions), WORKERS=N, DASK=tls://host:8786 to use a cluster (docs/classroom.md: its certificates).
grade: $(STAMP)
	$(PY) -m rlhf_course.grading grade $(ASSIGNMENT) $(if $(WORKERS),--workers=$(WORKERS)) $(if $(DASK),--dask=$(DASK))

## source/ -> release/ (commit the result).
release: $(STAMP)
	$(PY) -m rlhf_course.grading release

## The language editions' translations (i18n/): what needs revisiting before `make release` builds them
## (mark an entry revisited: python -m rlhf_course.grading editions revisit FILE ID).
editions: $(STAMP)
	$(PY) -m rlhf_course.grading editions status

## JupyterLab for a student, on student/ (git-ignored): the course's assignments are released into its own exchange
## first (exchange/; what is already there stays), then Nbgrader > Assignment List > Fetch writes each assignment into
## student/ and Submit sends what was saved there (jupyter/student/nbgrader_config.py).  nbgrader's student plugins
## only, no news prompt (jupyter/student/labconfig, added to this server's config path; nothing global changes).
## torch's threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE): a spinning one takes the CPU its partner needs;
## the lab trains its SFT policy and reward model once (.cache/lab: rlhf_course/lab/shared_stages.py).
## As root too (--allow-root when uid 0).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(PY) -m rlhf_course.grading lab-release
	mkdir -p student
	cd student && OMP_WAIT_POLICY=PASSIVE RLHF_LAB_CACHE=$(CURDIR)/.cache/lab \
	  JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter/student$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH)) \
	  $(abspath $(VENV))/bin/jupyter lab --notebook-dir=. $(ALLOW_ROOT)

## JupyterLab on the course root for instructors (hidden checks importable, formgrader available).
lab-instructor: $(STAMP)
	PYTHONPATH=$(CURDIR)/instructor:$(CURDIR) $(VENV)/bin/jupyter lab $(ALLOW_ROOT)

## A local classroom on this machine for trying the course (root: it creates Unix accounts): JupyterHub 6
## on http://127.0.0.1:$(HUB_PORT), an instructor and students (HUB_STUDENTS) with a random password each,
## printed; every JupyterLab runs as its user.  Ctrl-C stops it and removes the accounts.
HUB_PORT ?= 8000
HUB_STUDENTS ?= alice bob carol
HUB_BASE ?= /srv/rlhf-classroom
HUB_PREFIX ?= rlhf_
HUB_CLASS ?= lab
# configurable-http-proxy 5.3.0 and each of its dependencies, pinned by jupyter/hub/package-lock.json
CHP_DIR := .cache/hub-proxy
CHP := $(CHP_DIR)/node_modules/.bin/configurable-http-proxy
# Under a lock: two hub tests (two pytest workers) may ask for it at once; the second finds it built.
$(CHP): jupyter/hub/package.json jupyter/hub/package-lock.json
	mkdir -p $(CHP_DIR)
	flock $(CHP_DIR)/.build.lock sh -c '[ $@ -nt jupyter/hub/package-lock.json ] && [ $@ -nt jupyter/hub/package.json ] || \
	  { cp jupyter/hub/package.json jupyter/hub/package-lock.json $(CHP_DIR)/ && \
	    (cd $(CHP_DIR) && npm ci --silent --no-audit --no-fund) && touch $@; }'

# HUB_CLASS: what the hub is ready for (lab, the default: each server keeps a kernel with the notebook's imports
# done, the students' servers are started in the background as the hub starts, and a lab holding a training slot
# goes first (CPU weight 10000) on at most 0.85 of the cores among the slots; burst: the same without that boost,
# a student's Validate yielding instead, for a class that runs everything at once; off: none of it).  The variables below tune it; each wins over HUB_CLASS.
# Each user's server and kernels together: HUB_MEMORY (4G), HUB_CPUS (1), HUB_PROCESSES (256), HUB_FILE_SIZE
# (largest file, 1G).  HUB_IDLE_TIMEOUT: seconds before an idle server is stopped (3600; its files stay; 0: never).
# HUB_TRAINING_SLOTS: labs that train at once, the others wait their turn (cores / HUB_CPUS; 0: no queue);
# HUB_TRAINING_WAIT: seconds a lab waits without its place in the queue moving, then trains anyway (180); HUB_TRAINING_HOLD: seconds a lab holds its slot
# at most, then the next one has it (180; one user holds one slot or ticket at a time); HUB_TRAINING_BOOST: a lab's
# CPU weight while it holds a slot (everyone else 100; 100: no boost; the class's by default), and
# HUB_TRAINING_BOOST_CPUS its quota meanwhile, below HUB_CPUS (the share it leaves the others).
# HUB_VALIDATE_SLOTS: Validates that run at once, the others wait their turn and are told their place (the cores;
# 0: no queue); HUB_VALIDATE_WEIGHT: a validating student's CPU weight meanwhile (a burst's 10, below everyone's
# 100: Validate yields to the class's cells and trainings; 100, a lab's: no yield).  HUB_WARM_KERNELS=1|0
# and HUB_PRESTART=1|0: the warm kernels and the servers' start in the background, on or off whatever the class.
# HUB_LAB_SETTING: the length of every student's lab (quick, full, smoke: RLHF_LAB_SETTING), whose SFT policy and
# reward model make hub trains once for the class (quick).
# make hub refuses a checkout other accounts can read; HUB_MAKE_PRIVATE=1 does chmod o-rwx.
hub: $(STAMP) $(CHP)
	$(PY) -m rlhf_course.classroom --proxy $(CHP) --port $(HUB_PORT) --base $(HUB_BASE) --prefix $(HUB_PREFIX) \
	  --students $(HUB_STUDENTS) $(if $(HUB_MAKE_PRIVATE),--make-checkout-private) \
	  $(if $(HUB_MEMORY),--memory $(HUB_MEMORY)) $(if $(HUB_CPUS),--cpus $(HUB_CPUS)) \
	  $(if $(HUB_PROCESSES),--processes $(HUB_PROCESSES)) $(if $(HUB_FILE_SIZE),--file-size $(HUB_FILE_SIZE)) \
	  $(if $(HUB_IDLE_TIMEOUT),--idle-timeout $(HUB_IDLE_TIMEOUT)) \
	  $(if $(HUB_TRAINING_SLOTS),--training-slots $(HUB_TRAINING_SLOTS)) \
	  $(if $(HUB_TRAINING_WAIT),--training-wait $(HUB_TRAINING_WAIT)) \
	  $(if $(HUB_TRAINING_HOLD),--training-hold $(HUB_TRAINING_HOLD)) \
	  $(if $(HUB_TRAINING_BOOST),--training-boost $(HUB_TRAINING_BOOST)) \
	  $(if $(HUB_TRAINING_BOOST_CPUS),--training-boost-cpus $(HUB_TRAINING_BOOST_CPUS)) \
	  $(if $(HUB_VALIDATE_SLOTS),--validate-slots $(HUB_VALIDATE_SLOTS)) \
	  $(if $(HUB_VALIDATE_WEIGHT),--validate-weight $(HUB_VALIDATE_WEIGHT)) \
	  $(if $(filter 1,$(HUB_WARM_KERNELS)),--warm-kernels) $(if $(filter 0,$(HUB_WARM_KERNELS)),--no-warm-kernels) \
	  $(if $(filter 1,$(HUB_PRESTART)),--prestart) $(if $(filter 0,$(HUB_PRESTART)),--no-prestart) \
	  --class $(HUB_CLASS) $(if $(HUB_LAB_SETTING),--lab-setting $(HUB_LAB_SETTING))

clean:
	rm -rf submitted autograded/*/ feedback gradebook.db grades.csv grading_report.csv collect_report.csv $(OUT)
