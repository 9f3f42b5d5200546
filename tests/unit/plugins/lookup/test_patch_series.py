# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible.errors import AnsibleLookupError
from ansible_collections.glm53.tensorfold.plugins.lookup.patch_series import LookupModule
from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import image_tag, inputs


def write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


@pytest.fixture
def dirs(tmp_path):
    recipe = tmp_path / "recipe"
    site = tmp_path / "site"
    write(recipe, "0010-c.patch", b"c")
    write(recipe, "0002-b.patch", b"b")
    write(recipe, "0001-a.patch", b"a")
    write(site, "0100-site.patch", b"s")
    write(site, "README.md", b"how to name site patches")
    return recipe, site


def run(*terms):
    return LookupModule().run(list(terms), {})


def test_series_comes_in_application_order_recipe_then_site(dirs):
    recipe, site = dirs
    got = run(str(recipe), str(site))
    assert [e["name"] for e in got] == ["0001-a.patch", "0002-b.patch", "0010-c.patch", "0100-site.patch"]
    assert [e["source"] for e in got] == ["recipe", "recipe", "recipe", "site"]
    assert got[0]["sha256"] == hashlib.sha256(b"a").hexdigest()


def test_an_empty_source_is_skipped_and_a_missing_one_is_an_error(dirs, tmp_path):
    recipe, _site = dirs
    assert len(run(str(recipe), "")) == 3
    with pytest.raises(AnsibleLookupError):
        run(str(tmp_path / "nowhere"))


def test_editing_the_readme_beside_the_site_patches_keeps_the_tag(dirs):
    recipe, site = dirs
    before = image_tag("FROM x", run(str(recipe), str(site)), {"p": 1})
    write(site, "README.md", b"edited guidance")
    assert image_tag("FROM x", run(str(recipe), str(site)), {"p": 1}) == before


def test_editing_a_site_patch_changes_the_tag(dirs):
    recipe, site = dirs
    before = image_tag("FROM x", run(str(recipe), str(site)), {"p": 1})
    write(site, "0100-site.patch", b"s2")
    assert image_tag("FROM x", run(str(recipe), str(site)), {"p": 1}) != before


def test_a_misnamed_site_file_is_reported_not_skipped(dirs):
    recipe, site = dirs
    write(site, "fix-typo.diff", b"x")
    problems = inputs(run(str(recipe), str(site)), "gpu1", "FROM x", {}, 3)["problems"]
    assert len(problems) == 1
    assert problems[0]["code"] == "E_PATCHES"
    assert problems[0]["message"].startswith("[E_PATCHES] gpu1: patch fix-typo.diff (site)")


def test_wrong_recipe_count_is_an_e_patches_problem(dirs):
    recipe, site = dirs
    problems = inputs(run(str(recipe), str(site)), "gpu1", "FROM x", {}, 93)["problems"]
    assert [p["code"] for p in problems] == ["E_PATCHES"]
    assert "3 patches, 93 expected" in problems[0]["message"]


def test_editing_a_readme_or_the_series_file_beside_the_patches_never_changes_the_tag(dirs, tmp_path):
    """The tag's inputs are the Dockerfile, the patches and the pins: the notes an operator keeps
    beside the patches (README*, the series listing, hidden files) are read by nobody."""
    recipe, site = dirs
    pins = {"TENSORFOLD_COMMIT": "a" * 40}
    before = image_tag("FROM x\n", run(str(recipe), str(site)), pins)
    write(site, "README.md", b"edited: a new paragraph on how to name site patches")
    write(recipe, "README", b"a note")
    write(recipe, "series", b"0001-a.patch\n0002-b.patch\n0010-c.patch\n")
    write(recipe, ".notes.swp", b"editor state")
    assert image_tag("FROM x\n", run(str(recipe), str(site)), pins) == before
    # The same edit to a patch does change it (the comparison above can fail).
    write(recipe, "0002-b.patch", b"b, edited")
    assert image_tag("FROM x\n", run(str(recipe), str(site)), pins) != before
