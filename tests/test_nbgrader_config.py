"""nbgrader_config.py, loaded as nbgrader loads it (several times in one process)."""
import os

from traitlets.config.loader import PyFileConfigLoader


def _load(repo):
    return PyFileConfigLoader("nbgrader_config.py", path=str(repo)).load_config()


def test_loading_the_config_again_adds_nothing_to_the_search_path(repo, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    for _ in range(3):
        config = _load(repo)
    folders = os.environ["PYTHONPATH"].split(os.pathsep)
    assert folders == [str(repo / "instructor"), str(repo), "/elsewhere"]
    assert config.CourseDirectory.root == str(repo)
    assert config.Execute.timeout == 120
