"""Hugging Face Hub ids wherever a checkpoint is taken, without network: a test-built Hub cache
(``models--org--name/{blobs,refs,snapshots}``) with HF_HUB_OFFLINE=1, and a stand-in for the
Hub endpoint on 127.0.0.1 (HF_ENDPOINT) that ``snapshot_download`` really downloads from."""

import hashlib
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import huggingface_hub
import pytest
import torch
from omegaconf import OmegaConf

import genodiff
from genodiff import cli
from genodiff.backbones import build
from genodiff.checkpoints import (
    export_model,
    init_backbones,
    load_model,
    load_pretrained,
    save_pretrained,
)
from genodiff.config import load_config
from genodiff.errors import InputValueError
from genodiff.finetuning.classifier import load_backbone
from genodiff.hub import HubError, parse_hub_id, unreadable_cache_entry
from genodiff.model import GenerativeModel
from tests.checkpoint_files import save_as_trained
from tests.test_cli import DEMO, TINY

REPO = "test-org/tiny-mamba"
MAMBA = dict(name="mamba", d_model=16, n_layer=2, vocab_size=12)
IDS = torch.randint(7, 11, (2, 24), generator=torch.Generator().manual_seed(0))


def commit_of(repo: str, revision: str) -> str:
    return hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()  # 40 hex digits, like git


def model_folder(tmp_path: Path, seed: int) -> tuple[Path, torch.nn.Module]:
    torch.manual_seed(seed)
    model = build(**MAMBA).eval()
    return save_pretrained(model, tmp_path / f"model_{seed}"), model


def assert_same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    with torch.no_grad():
        assert torch.equal(a.eval()(IDS), b.eval()(IDS))


def write_hub_cache(cache: Path, repo: str, revisions: dict[str, Path]) -> None:
    """The Hugging Face cache layout: file contents in blobs/ (named by their hash), each
    commit's files as symlinks in snapshots/<commit>/, branch and tag names in refs/."""
    storage = cache / ("models--" + repo.replace("/", "--"))
    for revision, folder in revisions.items():
        commit = commit_of(repo, revision)
        (storage / "refs").mkdir(parents=True, exist_ok=True)
        (storage / "refs" / revision).write_text(commit)
        snapshot = storage / "snapshots" / commit
        snapshot.mkdir(parents=True)
        for file in folder.iterdir():
            data = file.read_bytes()
            blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(exist_ok=True)
            blob.write_bytes(data)
            (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # no local folder named like the ids unless a test makes one
    return cache


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "text, expected",
    [
        ("kuleshov-group/caduceus-ph_seqlen-131k_d_model-256_n_layer-16", None),
        ("state-spaces/mamba-130m@main", "main"),
        ("LongSafari/hyenadna-tiny-1k-seqlen@refs/pr/1", "refs/pr/1"),
        (f"{REPO}@{'a' * 40}", "a" * 40),
    ],
)
def test_hub_ids_parse(text, expected):
    hub_id = parse_hub_id(text)
    assert hub_id.repo_id == text.split("@")[0] and hub_id.revision == expected
    assert str(hub_id) == text


@pytest.mark.parametrize(
    "text", ["model.ckpt", "./org/name", "/abs/org/name", "a/b/c", "org/", "~/org/name", "-o/n"]
)
def test_paths_are_not_hub_ids(text):
    assert parse_hub_id(text) is None


# ----------------------------------------------------------------------------- offline cache


def test_ids_load_from_the_cache_offline_with_revisions(tmp_path, offline_cache):
    main, model_main = model_folder(tmp_path, seed=1)
    v2, model_v2 = model_folder(tmp_path, seed=2)
    write_hub_cache(offline_cache, REPO, {"main": main, "v2": v2})
    assert_same(load_pretrained(REPO), model_main)
    assert_same(load_pretrained(f"{REPO}@v2"), model_v2)
    assert_same(load_pretrained(f"{REPO}@{commit_of(REPO, 'v2')}"), model_v2)


def test_a_local_folder_wins_over_the_id(tmp_path, offline_cache):
    cached, _ = model_folder(tmp_path, seed=1)
    write_hub_cache(offline_cache, REPO, {"main": cached})
    torch.manual_seed(3)
    local = build(**MAMBA)
    save_pretrained(local, tmp_path / REPO)  # ./test-org/tiny-mamba, relative to the cwd
    assert_same(load_pretrained(REPO), local)


def test_offline_with_an_empty_cache_is_one_clear_error(offline_cache, capsys):
    with pytest.raises(HubError) as err:
        load_pretrained("test-org/not-downloaded@v1")
    message = str(err.value)
    assert "test-org/not-downloaded@v1" in message and str(offline_cache) in message
    assert re.search(
        r"(hf|huggingface-cli) download test-org/not-downloaded --revision v1", message
    )
    assert "HF_HUB_OFFLINE=0" in message
    # the command line turns it into one line on stderr and exit status 2
    args = ["sample", "--checkpoint", "test-org/not-downloaded", "--out", "x.fa"]
    assert cli.main(args) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and "test-org/not-downloaded" in err_lines[0]


def test_a_mistyped_local_path_is_not_read_as_a_hub_id_alone(tmp_path, offline_cache):
    (tmp_path / "outputs" / "demo").mkdir(parents=True)  # a run folder, mistyped below
    with pytest.raises(HubError) as err:
        genodiff.load("outputs/dmeo")
    message = str(err.value)
    # It says first that no such local path exists and which one is spelled close to it.
    assert message.startswith("outputs/dmeo: no local file or folder of that name")
    assert f"did you mean {Path('outputs', 'demo')}?" in message
    assert "Hugging Face Hub id" in message  # and then what the Hub reading found
    with pytest.raises(HubError, match=r"outputs/zzz: no local file .* in the local folder"):
        genodiff.load("outputs/zzz")  # nothing close: the folder it looked in


def test_init_from_and_pretrained_take_ids(tmp_path, offline_cache):
    torch.manual_seed(5)
    caduceus = build(name="caduceus", d_model=64, n_layer=2, vocab_size=12)
    write_hub_cache(
        offline_cache, "test-org/tiny-caduceus", {"main": save_pretrained(caduceus, tmp_path / "c")}
    )
    cfg = load_config(DEMO, [*TINY, "init_from=test-org/tiny-caduceus"])
    assert cfg.init_from == "test-org/tiny-caduceus"  # kept for the Hub, not made a path
    model = GenerativeModel(OmegaConf.to_container(cfg, resolve=True))
    init_backbones([model.backbone], cfg.init_from)
    assert_same(model.backbone, caduceus)
    assert_same(load_backbone("test-org/tiny-caduceus")[0], caduceus)


def training_checkpoint(path: Path, seed: int, step: int = 3) -> GenerativeModel:
    """A training checkpoint as ``genodiff train`` writes it (the keys genodiff reads)."""
    torch.manual_seed(seed)
    cfg = load_config(DEMO, [*TINY, "ema.decay=0.9"])
    model = GenerativeModel(OmegaConf.to_container(cfg, resolve=True))
    with torch.no_grad():  # make the averaged weights differ from the trained ones
        for p in model.ema.module.parameters():
            p.add_(0.01)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_as_trained(path, model, global_step=step, epoch=0)
    return model


def test_sample_and_eval_checkpoints_take_ids(tmp_path, offline_cache):
    run = tmp_path / "run"
    trained = training_checkpoint(run / "last.ckpt", seed=7)
    (run / "notes.txt").write_text("not a checkpoint")
    exported = export_model(run / "last.ckpt", tmp_path / "exported")
    write_hub_cache(offline_cache, "test-org/run", {"main": run})
    write_hub_cache(offline_cache, "test-org/exported", {"main": exported})
    from_ckpt = load_model("test-org/run")
    assert_same(from_ckpt.backbone, trained.backbone)
    assert_same(from_ckpt.eval_backbone, trained.eval_backbone)
    from_folder = load_model("test-org/exported")  # the EMA weights, its config
    assert_same(from_folder.eval_backbone, trained.eval_backbone)
    assert from_folder.config == trained.config


def test_a_folder_without_a_run_is_refused(tmp_path, offline_cache):
    backbone_only, _ = model_folder(tmp_path, seed=1)
    write_hub_cache(offline_cache, REPO, {"main": backbone_only})
    with pytest.raises(FileNotFoundError, match="no genodiff.json .* no \\*.ckpt"):
        load_model(REPO)


@pytest.mark.parametrize("damaged", ["genodiff.json", "model.safetensors", "last.ckpt"])
def test_a_damaged_download_is_named_where_a_checkpoint_is_taken(tmp_path, offline_cache, damaged):
    """A Hub id whose cached run (load_model), export (load_model) or backbone folder
    (load_pretrained) holds a damaged file: the reader's error names the cached file and says
    to download it again."""
    run = tmp_path / "run"
    training_checkpoint(run / "last.ckpt", seed=3)
    exported = export_model(run / "last.ckpt", tmp_path / "exported")
    backbone, _ = model_folder(tmp_path, seed=2)
    loads = {"test-org/run": load_model, "test-org/exported": load_model}
    loads["test-org/backbone"] = load_pretrained
    folders = {"test-org/run": run, "test-org/exported": exported, "test-org/backbone": backbone}
    for repo, folder in folders.items():
        if (folder / damaged).exists():
            content = (folder / damaged).read_bytes()
            (folder / damaged).write_bytes(content[: len(content) // 2])  # a download cut short
        write_hub_cache(offline_cache, repo, {"main": folder})
    damaged_repos = [repo for repo, folder in folders.items() if (folder / damaged).exists()]
    assert damaged_repos
    for repo in damaged_repos:
        with pytest.raises(InputValueError) as raised:
            loads[repo](repo)
        entry = offline_cache / ("models--" + repo.replace("/", "--"))
        snapshot = entry / "snapshots" / commit_of(repo, "main")
        message = str(raised.value)
        assert message.startswith(f"{snapshot / damaged} ")  # the file, as the reader names it
        assert f"; delete the folder {entry} and download it again with `" in message
        assert message.endswith(  # not the advice for one's own file: restore it, export it
            f" download {repo} --revision {snapshot.name}` (into the same HF_HUB_CACHE)"
        )


def test_a_damaged_cached_file_is_named_with_what_to_do(tmp_path, offline_cache):
    """``unreadable_cache_entry``: which cached file of a snapshot is damaged (JSON cut short,
    safetensors shorter or longer than its header says, a link to a missing blob), for a
    caller whose library failed to read the snapshot; None for intact files."""
    from safetensors.torch import save_file

    files = tmp_path / "files"
    files.mkdir()
    (files / "config.json").write_text(json.dumps({"d_model": 16}))
    (files / "vocab.txt").write_text("a\nb\n")
    tensors = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(5, dtype=torch.int64)}
    save_file(tensors, files / "model.safetensors", metadata={"format": "pt"})
    whole = (files / "model.safetensors").read_bytes()
    header = 8 + int.from_bytes(whole[:8], "little")
    assert len(whole) == header + 6 * 4 + 5 * 8  # its tensors' bytes follow the header
    damages = [
        ("config.json", b'{"d_model": 1', "(not JSON:"),
        ("model.safetensors", whole[:-1], "file not fully covered)"),  # safetensors' words
        ("model.safetensors", whole + b"\0", "file not fully covered)"),
        ("model.safetensors", whole[: header - 2], "invalid header length)"),
    ]
    write_hub_cache(offline_cache, "test-org/intact", {"main": files})
    intact = offline_cache / "models--test-org--intact" / "snapshots"
    intact /= commit_of("test-org/intact", "main")
    assert unreadable_cache_entry(intact) is None
    for k, (name, content, problem) in enumerate(damages):
        repo = f"test-org/damaged-{k}"
        damaged = tmp_path / f"damaged-{k}"
        damaged.mkdir()
        for file in files.iterdir():
            (damaged / file.name).write_bytes(file.read_bytes())
        (damaged / name).write_bytes(content)
        write_hub_cache(offline_cache, repo, {"main": damaged})
        entry = offline_cache / f"models--test-org--damaged-{k}"
        snapshot = entry / "snapshots" / commit_of(repo, "main")
        message = unreadable_cache_entry(snapshot)
        assert message.startswith(f"its cached file {snapshot / name} is present but unreadable ")
        assert problem in message and f"delete the folder {entry} and download it again" in message
        commit = commit_of(repo, "main")  # the snapshot's, so that the same files come again
        assert f"download {repo} --revision {commit}` (into the same HF_HUB_CACHE)" in message
    (intact / "vocab.txt").resolve().unlink()  # the blob the snapshot's link points to
    message = unreadable_cache_entry(intact)
    assert f"{intact / 'vocab.txt'} is present but unreadable (a link to a missing blob)" in message


def test_a_fifo_or_a_huge_record_in_a_snapshot_is_judged_in_bounded_time_and_memory(tmp_path):
    """``unreadable_cache_entry`` reads no FIFO (the read would wait for a writer forever) and
    parses no JSON larger than a record genodiff reads (``plain_records.MAX_JSON_BYTES``)."""
    from genodiff.hub import CHECKED_JSON_BYTES
    from genodiff.plain_records import MAX_JSON_BYTES

    assert CHECKED_JSON_BYTES == MAX_JSON_BYTES
    snapshot = tmp_path / "models--org--name" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    huge = snapshot / "a.json"
    with huge.open("wb") as file:  # sparse: no disk, but reading it whole would take 64 MiB
        file.truncate(CHECKED_JSON_BYTES + 1)
    assert unreadable_cache_entry(snapshot) is None  # not judged: larger than any record
    blob = snapshot.parents[1] / "blobs" / "b"
    blob.parent.mkdir()
    os.mkfifo(blob)
    (snapshot / "b.json").symlink_to(blob)  # a snapshot's files are links to blobs
    message = unreadable_cache_entry(snapshot)  # returns: the FIFO is never opened
    assert f"{snapshot / 'b.json'} is present but unreadable (not a regular file)" in message


# ----------------------------------------------------------------------------- downloads


class FakeHub:
    """The Hub routes ``snapshot_download`` calls, served from local folders on 127.0.0.1:
    repository info (``/api/models/{repo}/revision/{rev}``), the file listing
    (``/api/models/{repo}/tree/{rev}``) and files (``/{repo}/resolve/{rev}/{path}``, with the
    ``X-Repo-Commit`` and ``ETag`` headers the cache is keyed by). ``repos`` maps a repository
    to its revisions (branch or tag name -> folder); each is also reachable by commit hash."""

    def __init__(self, repos: dict[str, dict[str, Path]]):
        self.revisions = {
            (repo, name): (commit_of(repo, rev), folder)
            for repo, revs in repos.items()
            for rev, folder in revs.items()
            for name in (rev, commit_of(repo, rev))
        }
        self.repos = set(repos)
        self.requests: list[tuple[str, str, str | None]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub.serve(self, with_body=False)

            def do_GET(self):
                hub.serve(self, with_body=True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def downloaded(self) -> set[str]:
        return {path.rsplit("/", 1)[1] for method, path, _ in self.requests if method == "GET"}

    def serve(self, handler: BaseHTTPRequestHandler, with_body: bool) -> None:
        path = urlsplit(handler.path).path
        self.requests.append((handler.command, path, handler.headers.get("Authorization")))
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo, kind, revision = "/".join(parts[2:4]), parts[4], "/".join(parts[5:])
            found = self._find(handler, repo, revision)
            if found is not None:
                self._api(handler, repo, kind, *found)
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo, revision, name = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            found = self._find(handler, repo, revision)
            if found is not None:
                self._file(handler, *found, name, with_body)
        else:
            self._error(handler, 404, None)

    def _find(self, handler, repo: str, revision: str) -> tuple[str, Path] | None:
        if repo not in self.repos:
            return self._error(handler, 404, "RepoNotFound")
        if (repo, revision) not in self.revisions:
            return self._error(handler, 404, "RevisionNotFound")
        return self.revisions[repo, revision]

    def _api(self, handler, repo: str, kind: str, commit: str, folder: Path) -> None:
        files = sorted(p.name for p in folder.iterdir())
        if kind == "revision":
            body = {"id": repo, "modelId": repo, "sha": commit, "private": False}
            body["siblings"] = [{"rfilename": name} for name in files]
        else:  # tree
            body = [
                {"type": "file", "path": name, "size": (folder / name).stat().st_size, "oid": name}
                for name in files
            ]
        self._send(handler, 200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _file(self, handler, commit: str, folder: Path, name: str, with_body: bool) -> None:
        file = folder / name
        if not file.is_file():
            self._error(handler, 404, "EntryNotFound", {"X-Repo-Commit": commit})
            return
        data = file.read_bytes()
        etag = hashlib.sha256(data).hexdigest()
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}
        self._send(handler, 200, data, headers, with_body)

    def _error(self, handler, status: int, code: str | None, headers: dict | None = None):
        self._send(
            handler, status, b"{}", {**({"X-Error-Code": code} if code else {}), **(headers or {})}
        )

    @staticmethod
    def _send(handler, status: int, data: bytes, headers: dict, with_body: bool = True) -> None:
        handler.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(data))}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if with_body:
            handler.wfile.write(data)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    main, model_main = model_folder(tmp_path, seed=1)
    (main / "README.md").write_text("not read by genodiff, so never downloaded\n")
    v2, model_v2 = model_folder(tmp_path, seed=2)
    hub = FakeHub({REPO: {"main": main, "v2": v2}})
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: as a process started online would
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.chdir(tmp_path)
    yield hub, model_main, model_v2
    hub.close()


def test_ids_download_from_the_endpoint_into_the_cache(tmp_path, fake_hub, monkeypatch):
    hub, model_main, model_v2 = fake_hub
    assert_same(load_pretrained(REPO), model_main)
    assert hub.downloaded() >= {"config.json", "model.safetensors"}
    assert "README.md" not in hub.downloaded()  # only the files genodiff reads
    repo_requests = [auth for _, path, auth in hub.requests if REPO in path]
    assert repo_requests and all(auth == "Bearer hf_test_token" for auth in repo_requests)
    snapshot = tmp_path / "hf-cache" / "models--test-org--tiny-mamba" / "snapshots"
    assert (snapshot / commit_of(REPO, "main") / "model.safetensors").is_file()
    assert_same(load_pretrained(f"{REPO}@v2"), model_v2)

    hub.close()  # the endpoint is gone: what was fetched loads from the cache, offline
    with pytest.raises(HubError, match=rf"test-org/never-fetched.*{hub.url} is unreachable"):
        load_pretrained("test-org/never-fetched")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert_same(load_pretrained(REPO), model_main)
    assert_same(load_pretrained(f"{REPO}@v2"), model_v2)


def serve_safetensors_as(monkeypatch, send) -> None:
    """``FakeHub`` answering a GET of a ``.safetensors`` file with ``send(handler, commit,
    data)``; every other request as the Hub does."""
    serve_file = FakeHub._file

    def serve(self, handler, commit, folder, name, with_body):
        if not (with_body and name.endswith(".safetensors")):
            return serve_file(self, handler, commit, folder, name, with_body)
        send(handler, commit, (folder / name).read_bytes())

    monkeypatch.setattr(FakeHub, "_file", serve)


def test_a_transfer_that_breaks_off_is_one_line_saying_what_to_do(fake_hub, monkeypatch):
    """A file's body cut short on every try: huggingface_hub retries, then raises its HTTP
    library's error (was: that error's traceback)."""
    hub = fake_hub[0]

    def cut_short(handler, commit, data):
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", commit)
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data[:100])
        handler.close_connection = True

    serve_safetensors_as(monkeypatch, cut_short)
    with pytest.raises(HubError, match=rf"{REPO}.*download from {hub.url} broke off") as caught:
        load_pretrained(REPO)
    assert "run again to resume it" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_file_of_another_size_than_announced_is_one_line(fake_hub, monkeypatch):
    """The body whole by its Content-Length, but shorter than the size the file's metadata
    announced (a mirror serving another file): huggingface_hub's check raises an OSError of
    two lines (was: its traceback)."""
    hub = fake_hub[0]

    def shorter(handler, commit, data):
        etag = hashlib.sha256(data).hexdigest()
        FakeHub._send(handler, 200, data[:100], {"X-Repo-Commit": commit, "ETag": f'"{etag}"'})

    serve_safetensors_as(monkeypatch, shorter)
    with pytest.raises(HubError, match=rf"download from {hub.url} broke off \(.*size") as caught:
        load_pretrained(REPO)
    assert "has size 100" in str(caught.value) and "run again" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_endpoint_that_answers_without_the_hubs_headers_is_not_called_unreachable(
    fake_hub, monkeypatch
):
    hub = fake_hub[0]

    def without_headers(self, handler, commit, folder, name, with_body):  # a plain web server
        self._send(handler, 200, (folder / name).read_bytes(), {}, with_body)

    monkeypatch.setattr(FakeHub, "_file", without_headers)
    with pytest.raises(HubError, match=rf"{hub.url} answered, but not as a Hugging Face Hub") as e:
        load_pretrained(REPO)
    assert "unreachable" not in str(e.value)  # was: "... is unreachable"
    assert "X-Repo-Commit" in str(e.value) and "HF_ENDPOINT" in str(e.value)


def test_unknown_repositories_and_revisions_are_clear_errors(fake_hub):
    with pytest.raises(HubError, match=r"test-org/missing.*HTTP 404.*HF_TOKEN"):
        load_pretrained("test-org/missing")
    with pytest.raises(HubError, match=rf"{REPO}@nope.*HTTP 404"):
        load_pretrained(f"{REPO}@nope")
