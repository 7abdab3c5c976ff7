"""`make lab`'s first step (python -m rlhf_course.grading lab-release): each generated assignment released into the
course's own exchange, a refused one named with its reason, and, when nothing is released, a sentence that says so in
English and Chinese instead of an empty list."""
import nbformat

from rlhf_course import ASSIGNMENT, NOTEBOOK, i18n
from rlhf_course.exchange import local
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, release_course, repo_course


def test_lab_release_releases_what_is_missing_and_names_what_it_refuses(tmp_path, repo):
    course = release_course(copy_course(tmp_path / "course"))
    edited = course / "release" / ASSIGNMENT / NOTEBOOK
    nbformat.write(notebooks.fill_answers(notebooks.read(edited), examples.answers_for(repo_course(), ())), str(edited))
    course_handle = Course.at(course)
    said = local.release_for_lab(course_handle)
    outbound = course / "exchange" / "rlhf-course" / "outbound"
    assert sorted(p.name for p in outbound.iterdir()) == ["grpo", "grpo_zh", "kl_penalty", "kl_penalty_zh", "rlhf_zh"]
    assert said[0].startswith(f"{ASSIGNMENT} is not released: release/{ASSIGNMENT}/{NOTEBOOK} differs from what "
                              "`make release` generated"), said
    assert said[1] == f"Released to the exchange ({outbound}): grpo, grpo_zh, kl_penalty, kl_penalty_zh, rlhf_zh."
    assert said[2] == f"已发布到作业交换目录（{outbound}）：grpo, grpo_zh, kl_penalty, kl_penalty_zh, rlhf_zh。"
    assert said[-2].startswith(f"Your folder: {course / 'student'}. Nbgrader > Assignment List > Fetch")
    assert said[-1].startswith(f"你的作业目录：{course / 'student'}。")
    assert local.release_for_lab(course_handle)[1] == (f"Already in the exchange ({outbound}): grpo, grpo_zh, kl_penalty, "
                                                "kl_penalty_zh, rlhf_zh.")


def test_nothing_released_is_said_in_both_languages(tmp_path):
    course = copy_course(tmp_path / "course")  # no `make release` yet: no release/
    course_handle = Course.at(course)
    said = local.release_for_lab(course_handle)
    assert said[:2] == [local.NOTHING_RELEASED, i18n.t(local.NOTHING_RELEASED, i18n.CHINESE)]
    assert said[1].startswith("还没有发布任何作业")


def test_the_assignment_lists_sentence_is_the_translated_one(repo):
    """The lab extension (jupyter/labextension/src/index.js) says the same sentence in the same two languages."""
    script = (repo / "jupyter" / "labextension" / "src" / "index.js").read_text().replace("' +\n    '", "")
    assert f"'en': '{local.NOTHING_RELEASED}'" in script
    assert f"'zh-CN': '{i18n.t(local.NOTHING_RELEASED, i18n.CHINESE)}'" in script
