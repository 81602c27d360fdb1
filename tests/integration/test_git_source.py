"""A git repository as a source: real repositories made with the git executable, synced
through KnowledgeBase; the report's moves, news and deletions are those git names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsync import KnowledgeBase
from kbsync.errors import ConfigError, DocumentError, ParameterError
from kbsync.model import SourceItem
from kbsync.sources import Source
from kbsync.sources.git import GitSettings, GitSource, is_remote

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

_ENV = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.org",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


class Repo:
    """A repository the test writes to and commits in."""

    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        self._n = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet", *(["--bare"] if bare else []), "-b", "main")

    def git(self, *args: str) -> str:
        env = {**os.environ, **_ENV}
        self._n += 1
        date = f"2024-01-01T00:{self._n // 60:02d}:{self._n % 60:02d}+00:00"
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
        return subprocess.run(["git", "-C", str(self.path), *args], env=env, check=True,
                              capture_output=True).stdout.decode("utf-8", "surrogateescape")

    def write(self, files: dict[str, str | bytes | None]) -> None:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")

    def commit(self, files: dict[str, str | bytes | None] | None = None,
               message: str = "change") -> str:
        self.write(files or {})
        self.git("add", "-A")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def name_status(self, old: str, new: str) -> set[tuple[str, ...]]:
        """git's ``--name-status -M`` between two commits, as kbsync's actions would say it."""
        out = self.git("diff", "--name-status", "-M", "-z", old, new).split("\0")
        changes: set[tuple[str, ...]] = set()
        i = 0
        action = {"A": "new", "D": "deleted", "M": "modified"}
        while i < len(out) and out[i]:
            status = out[i]
            if status.startswith("R"):
                changes.add(("moved", out[i + 2], out[i + 1]))
                i += 3
            else:
                changes.add((action[status[0]], out[i + 1]))
                i += 2
        return changes


def _text(topic: str, n: int = 60) -> str:
    """A page of distinct prose about ``topic``, long enough to make a few chunks."""
    return "\n\n".join(f"Paragraph {i} about {topic}: the {topic} sentence number {i} says "
                       f"something particular of {topic} item {i * 7 % 13}." for i in range(n))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    r.commit({"guide/intro.md": "# Intro\n\n" + _text("intro"),
              "guide/setup.md": "# Setup\n\n" + _text("setup"),
              "faq.txt": _text("faq"),
              "README.md": "# Read me\n\n" + _text("readme")}, "first")
    return r


@pytest.fixture
def kb_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kb"
    KnowledgeBase.create(path, embedder={"kind": "hashing"}).close()
    return path


def _sync(kb_dir: Path, source: Source) -> dict[str, Any]:
    with KnowledgeBase.open(kb_dir) as kb:
        kb.sources = [source]
        result: dict[str, Any] = kb.sync().sources[0].to_dict()
        return result


def _source(kb_dir: Path, repository: Path | str, **settings: Any) -> GitSource:
    return GitSource(GitSettings(str(repository), **settings), name="docs",
                     state_dir=kb_dir / ".kbsync")


def _counts(report: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in report["documents"].items() if v}


def _actions(report: dict[str, Any]) -> set[tuple[str, ...]]:
    return {(c["action"], c["key"], c["from"]) if c["action"] == "moved"
            else (c["action"], c["key"]) for c in report["changes"]}


def _stored(kb_dir: Path) -> dict[str, dict[str, str]]:
    with KnowledgeBase.open(kb_dir) as kb:
        return {k: json.loads(d.metadata) for k, d in kb.store.manifest("docs").items()}


def test_a_first_sync_indexes_the_commit_with_its_id_and_author_date(
        repo: Repo, kb_dir: Path) -> None:
    head = repo.git("rev-parse", "HEAD").strip()
    date = repo.git("show", "-s", "--format=%aI", "HEAD").strip()
    repo.write({"guide/intro.md": "uncommitted edit", "scratch.md": "not committed"})
    report = _sync(kb_dir, _source(kb_dir, repo.path))
    assert _counts(report) == {"new": 4}
    assert report["listing_complete"] is True
    assert report["revision"] == f"{head} {date}"
    stored = _stored(kb_dir)
    assert sorted(stored) == ["README.md", "faq.txt", "guide/intro.md", "guide/setup.md"]
    assert {m["git_commit"] for m in stored.values()} == {head}
    assert {m["git_author_date"] for m in stored.values()} == {date}


def test_edits_renames_deletions_and_new_files_are_reported_as_git_names_them(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    _sync(kb_dir, source)
    old = repo.git("rev-parse", "HEAD").strip()
    repo.git("mv", "guide/setup.md", "guide/installing.md")
    new = repo.commit({"guide/intro.md": "# Intro\n\n" + _text("intro") + "\n\nOne more line.",
                       "faq.txt": None, "news.md": "# News\n\n" + _text("news")})
    expected = repo.name_status(old, new)
    assert ("moved", "guide/installing.md", "guide/setup.md") in expected
    report = _sync(kb_dir, source)
    assert _actions(report) == expected
    assert _counts(report) == {"modified": 1, "moved": 1, "deleted": 1, "new": 1,
                                   "unchanged": 1}
    stored = _stored(kb_dir)
    assert stored["news.md"]["git_commit"] == new
    assert stored["README.md"]["git_commit"] == old  # not read again: its blob is the same


def test_a_rename_with_edits_is_a_move_that_embeds_only_the_new_chunks(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    _sync(kb_dir, source)
    with KnowledgeBase.open(kb_dir) as kb:
        before = kb.store.manifest("docs")["guide/setup.md"]
    old = repo.git("rev-parse", "HEAD").strip()
    repo.git("mv", "guide/setup.md", "guide/installing.md")
    edited = "# Setup\n\n" + _text("setup") + "\n\nA closing paragraph about installing it."
    new = repo.commit({"guide/installing.md": edited})
    (status, *_), = [line.split("\t") for line in
                     repo.git("diff", "--name-status", "-M", old, new).splitlines()]
    assert status.startswith("R")
    assert status != "R100"
    report = _sync(kb_dir, source)
    assert _actions(report) == {("moved", "guide/installing.md", "guide/setup.md")}
    assert _counts(report) == {"moved": 1, "unchanged": 3}
    (change,) = report["changes"]
    assert 0.9 < change["similarity"] < 1  # compared with the text it had at its old key
    assert report["chunks"]["added"] >= 1
    assert report["embeddings_computed"] == report["chunks"]["added"]
    assert report["embeddings_reused"] == 0
    with KnowledgeBase.open(kb_dir) as kb:
        manifest = kb.store.manifest("docs")
        assert "guide/setup.md" not in manifest
        assert manifest["guide/installing.md"].text_hash != before.text_hash
        moved = kb.document("guide/installing.md")
        assert moved.generation == before.generation + 1  # the same record, at its new key
        hits = kb.search("closing paragraph about installing", k=1, mode="text")
        assert [h.key for h in hits] == ["guide/installing.md"]
        diff = kb.diff("guide/installing.md")
        assert diff.moved_from == "guide/setup.md"
        assert diff.previous is not None
        assert "closing paragraph" not in diff.previous
        assert kb.verify().ok
    assert _counts(_sync(kb_dir, source)) == {"unchanged": 4}


def test_a_plan_before_the_sync_leaves_the_rename_for_the_sync_to_see(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    _sync(kb_dir, source)
    repo.git("mv", "faq.txt", "questions.txt")
    repo.commit({"questions.txt": _text("faq") + "\n\nOne more question."})
    with KnowledgeBase.open(kb_dir) as kb:
        kb.sources = [source]
        planned = kb.plan().sources[0].to_dict()
    assert _actions(planned) == {("moved", "questions.txt", "faq.txt")}
    assert _actions(_sync(kb_dir, source)) == {("moved", "questions.txt", "faq.txt")}


def test_an_unchanged_blob_is_never_read(repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    _sync(kb_dir, source)
    edit = "edited faq\n\n" + _text("faq")
    repo.commit({"faq.txt": edit})
    report = _sync(kb_dir, source)
    assert report["bytes_read"] == len(edit.encode())
    assert _counts(report) == {"modified": 1, "unchanged": 3}
    again = _sync(kb_dir, source)
    assert again["bytes_read"] == 0
    assert _counts(again) == {"unchanged": 4}


def test_a_blob_id_is_never_racy_so_a_same_size_edit_is_seen_whenever_committed(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    stats = [item.stat for item in source.list().items]
    assert stats
    assert all(s is not None and s.mtime_ns == 0 and not s.racy for s in stats)
    _sync(kb_dir, source)
    body = (repo.path / "faq.txt").read_text(encoding="utf-8")
    repo.commit({"faq.txt": body.replace("faq", "FAQ", 1)})  # the same size
    assert _counts(_sync(kb_dir, source)) == {"modified": 1, "unchanged": 3}
    assert _sync(kb_dir, source)["bytes_read"] == 0  # and nothing read on trust


def test_the_tree_is_patched_from_git_diff_tree_once_a_commit_is_remembered(
        repo: Repo, kb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source(kb_dir, repo.path)
    _sync(kb_dir, source)
    repo.commit({"faq.txt": _text("faq") + "\n\nchanged"})
    calls: list[str] = []
    run = GitSource._run

    def spy(self: GitSource, args: list[str], **kw: Any) -> bytes:
        calls.append(next(iter(args)))
        return run(self, args, **kw)

    monkeypatch.setattr(GitSource, "_run", spy)
    report = _sync(kb_dir, source)
    assert _counts(report) == {"modified": 1, "unchanged": 3}
    assert "diff-tree" in calls
    assert "ls-tree" not in calls
    # A fresh source object (a new process) finds the remembered tree in the state folder.
    calls.clear()
    repo.commit({"faq.txt": _text("faq") + "\n\nchanged again"})
    assert _counts(_sync(kb_dir, _source(kb_dir, repo.path))) == {"modified": 1,
                                                                       "unchanged": 3}
    assert "diff-tree" in calls
    assert "ls-tree" not in calls


def test_a_force_pushed_ref_whose_old_commit_is_gone_lists_the_whole_tree(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    repo.commit({"extra.md": "# Extra\n\n" + _text("extra")})
    _sync(kb_dir, source)
    # Rewrite history: the commit that added extra.md is dropped and collected.
    repo.git("reset", "--hard", "--quiet", "HEAD~1")
    repo.commit({"faq.txt": "rewritten faq\n\n" + _text("faq")}, "rewrite")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "--prune=now", "--quiet")
    report = _sync(kb_dir, source)
    assert _actions(report) == {("deleted", "extra.md"), ("modified", "faq.txt")}
    assert sorted(_stored(kb_dir)) == ["README.md", "faq.txt", "guide/intro.md",
                                       "guide/setup.md"]


@pytest.mark.parametrize("what", ["unknown ref", "missing repository", "not a repository"])
def test_a_repository_or_ref_that_cannot_be_read_deletes_nothing(
        repo: Repo, kb_dir: Path, tmp_path: Path, what: str) -> None:
    _sync(kb_dir, _source(kb_dir, repo.path))
    if what == "unknown ref":
        broken = _source(kb_dir, repo.path, ref="no-such-branch")
        words = "ref 'no-such-branch' names no commit"
    elif what == "missing repository":
        shutil.rmtree(repo.path)
        broken = _source(kb_dir, repo.path)
        words = "no such folder"
    else:
        (tmp_path / "plain").mkdir()
        broken = _source(kb_dir, tmp_path / "plain")
        words = "not a git repository"
    report = _sync(kb_dir, broken)
    assert report["listing_complete"] is False
    assert report["documents"].get("deleted", 0) == 0
    message = report["failures"][0]["message"]
    assert "source 'docs'" in message
    assert str(broken.repository) in message
    assert words in message
    assert len(_stored(kb_dir)) == 4


def test_a_binary_file_and_odd_names_are_read_byte_for_byte(
        repo: Repo, kb_dir: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    odd = 'odd dir/tab\tand "quotes" and ünïcödé\nnewline.md'
    repo.commit({"image.png": png, odd: "# Odd\n\n" + _text("odd"),
                 "ascii\\back slash.txt": "back slash\r\n"})
    source = _source(kb_dir, repo.path)
    listing = source.list()
    items = {i.key: i for i in listing.items}
    assert odd in items
    assert "image.png" in items
    assert source.read(items["image.png"]) == png
    assert source.read(items["ascii\\back slash.txt"]) == b"back slash\r\n"
    report = _sync(kb_dir, source)
    assert report["failures"] == []
    assert report["skipped_unsupported"] == 1  # the image: no extractor reads it
    assert odd in _stored(kb_dir)
    source.close()


def test_a_read_of_a_blob_not_in_the_repository_names_the_document(
        repo: Repo, kb_dir: Path) -> None:
    source = _source(kb_dir, repo.path)
    item = next(i for i in source.list().items if i.key == "faq.txt")
    fake = SourceItem(item.key, item.locator, item.media_type, item.stat,
                      type(item.validators)(etag="0" * 40) if item.validators else None)
    with pytest.raises(DocumentError, match=r"faq.txt: blob 0{40} is missing"):
        source.read(fake)
    assert source.read(item).startswith(b"Paragraph 0")  # the process still answers
    source.close()


def test_subdirectory_include_and_exclude_select_what_is_indexed(
        repo: Repo, kb_dir: Path) -> None:
    repo.commit({"guide/.hidden.md": "hidden", "guide/deep/draft.md": "draft",
                 "guide/deep/page.md": "page"})
    source = _source(kb_dir, repo.path, subdirectory="guide", include=("**/*.md",),
                     exclude=("deep/draft.md",))
    assert [i.key for i in source.list().items] == ["deep/page.md", "intro.md", "setup.md"]
    assert next(i.locator for i in source.list().items) == "guide/deep/page.md"


def test_a_remote_url_is_fetched_into_a_mirror_under_the_state_folder(
        repo: Repo, kb_dir: Path, tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo.path), str(origin)],
                   check=True, capture_output=True)
    url = origin.as_uri()
    assert is_remote(url)
    assert is_remote("git@example.org:team/docs.git")
    assert not is_remote(str(repo.path))
    report = _sync(kb_dir, _source(kb_dir, url))
    assert _counts(report) == {"new": 4}
    mirrors = list((kb_dir / ".kbsync" / "git").glob("*.git"))
    assert len(mirrors) == 1
    repo.commit({"faq.txt": "pushed later\n\n" + _text("faq")})
    repo.git("push", "--quiet", str(origin), "main")
    assert _counts(_sync(kb_dir, _source(kb_dir, url))) == {"modified": 1, "unchanged": 3}
    # An unreachable remote deletes nothing.
    shutil.rmtree(origin)
    report = _sync(kb_dir, _source(kb_dir, url))
    assert report["listing_complete"] is False
    assert report["documents"].get("deleted", 0) == 0


def test_settings_are_checked_when_the_source_is_made() -> None:
    with pytest.raises(ParameterError, match="ref"):
        GitSettings("repo", ref="--upload-pack=evil")
    with pytest.raises(ParameterError, match="subdirectory"):
        GitSettings("repo", subdirectory="../elsewhere")
    with pytest.raises(ParameterError, match="repository"):
        GitSettings(" ")
    with pytest.raises(ParameterError, match="include"):
        GitSettings("repo", include="*.md")  # type: ignore[arg-type]


def test_a_kind_git_table_in_kbsync_toml_syncs_the_repository(repo: Repo, tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb2"
    kb_dir.mkdir()
    shutil.move(repo.path, kb_dir / "handbook")
    (kb_dir / "kbsync.toml").write_text(
        '[embedder]\nkind = "hashing"\n\n[[sources]]\nname = "handbook"\nkind = "git"\n'
        'repository = "handbook"\nref = "main"\nsubdirectory = "guide"\n'
        'include = ["**/*.md"]\n')
    with KnowledgeBase.open(kb_dir) as kb:
        report = kb.sync().sources[0].to_dict()
        assert _counts(report) == {"new": 2}
        assert sorted(kb.store.manifest("handbook")) == ["intro.md", "setup.md"]
    (kb_dir / "kbsync.toml").write_text(
        '[[sources]]\nname = "handbook"\nkind = "git"\nrepository = "handbook"\nbranch = "x"\n')
    with pytest.raises(ConfigError, match="branch"):
        KnowledgeBase.open(kb_dir)


def test_kbsync_init_takes_a_git_plus_argument(repo: Repo, tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb3"
    with KnowledgeBase.create(kb_dir, [f"git+{repo.path.as_uri()}"],
                              embedder={"kind": "hashing"}) as kb:
        assert [(s.name, s.kind) for s in kb.config.sources] == [("repo", "git")]
        assert _counts(kb.sync().sources[0].to_dict()) == {"new": 4}
    assert 'kind = "git"' in (kb_dir / "kbsync.toml").read_text()


def test_a_subdirectory_missing_from_the_commit_deletes_nothing(repo: Repo, kb_dir: Path) -> None:
    assert _counts(_sync(kb_dir, _source(kb_dir, repo.path, subdirectory="guide"))) == {"new": 2}
    repo.git("mv", "guide", "handbook")
    repo.commit()
    report = _sync(kb_dir, _source(kb_dir, repo.path, subdirectory="guide"))
    assert report["listing_complete"] is False
    assert "subdirectory 'guide' is not a folder of commit" in report["failures"][0]["message"]
    assert sorted(_stored(kb_dir)) == ["intro.md", "setup.md"]


def test_the_readme_git_example_runs_as_written(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Git repositories"):]
    start = section.index("```sh\n") + len("```sh\n")
    script = section[start:section.index("\n```", start)]
    env = {**os.environ, **_ENV, "PYTHONPATH": os.pathsep.join(
        [str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # The `kbsync` command of this checkout, whatever is installed.
    prelude = f'set -e\nkbsync() {{ "{sys.executable}" -m kbsync "$@"; }}\n'
    done = subprocess.run(["bash", "-c", prelude + script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "new deploy.md (handbook)" in done.stdout
    assert "handbook: at " in done.stdout  # the commit synced, and its author date
    assert "moved shipping.md (handbook), from deploy.md" in done.stdout


def test_reading_a_blob_of_a_remote_never_fetches_again(
        repo: Repo, kb_dir: Path, tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo.path), str(origin)],
                   check=True, capture_output=True)
    item = next(i for i in _source(kb_dir, origin.as_uri()).list().items if i.key == "faq.txt")
    shutil.rmtree(origin)  # a reader (a worker process) must not need the remote
    reader = _source(kb_dir, origin.as_uri())
    assert reader.read(item).startswith(b"Paragraph 0 about faq")
    reader.close()


def test_a_queued_document_keeps_what_its_source_knows_of_it() -> None:
    from kbsync.sync.work import job_data, job_item

    item = SourceItem("a.md", "a.md", "text/markdown", metadata=(("git_commit", "c0ffee"),),
                      renamed_from="old/a.md")
    assert job_item("a.md", json.loads(json.dumps(job_data(item, "d", "e")))) == item


def test_a_password_in_a_repository_url_is_not_shown_in_errors(kb_dir: Path) -> None:
    source = _source(kb_dir, "https://reader:s3cret-token@127.0.0.1:9/none.git",
                     fetch_timeout=20)
    listing = source.list()
    assert listing.complete is False
    message = listing.errors[0].message
    assert "s3cret-token" not in message
    assert "https://reader:***@127.0.0.1:9/none.git" in message


def test_links_and_names_that_are_not_utf8_are_skipped_with_a_warning(
        repo: Repo, kb_dir: Path) -> None:
    (repo.path / "link.md").symlink_to("faq.txt")
    with open(os.path.join(os.fsencode(repo.path), b"latin-\xe9.md"), "wb") as f:
        f.write(b"# Latin\n")
    repo.commit()
    listing = _source(kb_dir, repo.path).list()
    assert listing.complete is True
    assert [i.key for i in listing.items] == ["README.md", "faq.txt", "guide/intro.md",
                                              "guide/setup.md"]
    assert any("link.md: a symbolic link" in w for w in listing.warnings)
    assert any("not valid UTF-8" in w for w in listing.warnings)
    again = _source(kb_dir, repo.path).list()  # from the remembered tree this time
    assert (again.items, again.warnings) == (listing.items, listing.warnings)


def test_a_state_folder_that_cannot_be_written_fails_the_listing_not_the_run(
        repo: Repo, kb_dir: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state folder should be")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo.path), str(origin)],
                   check=True, capture_output=True)
    listing = GitSource(GitSettings(origin.as_uri()), name="docs", state_dir=blocked).list()
    assert listing.complete is False
    assert "cannot be listed (NotADirectoryError" in listing.errors[0].message
