"""The students' nbgrader configuration has one writer (rlhf_course/classroom/config.py): `make hub`'s generated
file, the Zero-to-JupyterHub image's, `make lab`'s and the course's own nbgrader_config.py, each loaded as nbgrader
loads it, give a student the same exchange and Validate limits; and the image's file loads without the launcher or
JupyterHub."""
import subprocess
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from rlhf_course.classroom import config as students
from rlhf_course.classroom.hub import students_nbgrader_config

REPO = Path(__file__).resolve().parents[2]
Z2JH_STUDENT = REPO / "deploy" / "z2jh" / "jupyter" / "student"
EXCHANGE_ROOT, COURSE_ID = "/srv/nbgrader/exchange-of-a-test", "rlhf-test-course"


def load(folder: Path) -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()


def student_settings(config: Config, expected: Config) -> dict:
    """``config``'s value of each setting ``expected`` holds: {(section, name): value}."""
    return {(section, name): config[section].get(name) for section in expected for name in expected[section]}


def test_every_students_config_gives_the_same_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", EXCHANGE_ROOT)  # as a JupyterHub's servers have them
    monkeypatch.setenv("RLHF_COURSE_ID", COURSE_ID)
    monkeypatch.setenv("PYTHONPATH", "")  # the course's config adds its folders: restored after the test
    hub_student = tmp_path / "jupyter" / "student"
    hub_student.mkdir(parents=True)
    (hub_student / "nbgrader_config.py").write_text(students_nbgrader_config(Path(EXCHANGE_ROOT), COURSE_ID))
    expected = Config()
    students.student(expected, EXCHANGE_ROOT, COURSE_ID)
    places = {"make hub": hub_student, "z2jh": Z2JH_STUDENT, "make lab": REPO / "jupyter" / "student",
              "the course": REPO}
    found = {place: student_settings(load(folder), expected) for place, folder in places.items()}
    wanted = student_settings(expected, expected)
    assert wanted[("Exchange", "root")] == EXCHANGE_ROOT and wanted[("CourseDirectory", "course_id")] == COURSE_ID
    assert wanted[("Execute", "iopub_timeout")] == students.VALIDATE_SECONDS
    assert wanted[("PatientExecute", "cpu_seconds")] == students.VALIDATE_CPU_SECONDS
    assert wanted[("ExchangeFactory", "submit")] == "rlhf_course.exchange.submit.StrictExchangeSubmit"
    for place, settings in found.items():
        assert settings == wanted, place
    assert len(students_nbgrader_config(Path(EXCHANGE_ROOT), COURSE_ID).splitlines()) == 2


def test_the_images_student_config_loads_without_the_launcher_or_jupyterhub():
    code = ("import sys\nfrom traitlets.config.loader import PyFileConfigLoader\n"
            f"PyFileConfigLoader('nbgrader_config.py', path={str(Z2JH_STUDENT)!r}).load_config()\n"
            "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'jupyterhub'"
            " or m.startswith(('rlhf_course.classroom.hub', 'rlhf_course.classroom.spawner'))))\n")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
