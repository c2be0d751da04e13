"""Source resolution, the registry, and verified downloads (served from 127.0.0.1).

The download tests run a small ``http.server`` in a thread on 127.0.0.1 that serves
copies of the real files (or broken ones); the registry's URLs are pointed at it, so
no test reaches the internet.
"""

import functools
import hashlib
import http.server
import pathlib
import re
import shutil
import threading
import zipfile

import pytest

from lablib.data import sources
from lablib.data.sources import ChecksumError, DataNotFoundError

SERVER_LIFETIME_S = 60  # the server stops itself after this, whatever happens


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; ``/short/NAME`` promises the whole file but sends half of it."""

    requests: list

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        self.requests.append(self.path)
        if self.path.startswith("/short/"):
            body = (pathlib.Path(self.directory) / self.path[len("/short/") :]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


class LocalServer:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.requests = []
        handler = functools.partial(
            type("Handler", (_Handler,), {"requests": self.requests}), directory=str(root)
        )
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.timer = threading.Timer(SERVER_LIFETIME_S, self.httpd.shutdown)
        self.timer.daemon = True

    def __enter__(self):
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No LABLIB_DATA_DIR, no offline flag, an empty cache in tmp_path/cache."""
    monkeypatch.delenv("LABLIB_DATA_DIR", raising=False)
    monkeypatch.delenv("LABLIB_OFFLINE", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("LABLIB_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    with LocalServer(root) as running:
        yield running


def point_registry_at(monkeypatch, base_url: str, prefix: str = "") -> dict:
    """Rewrite every URL of the registry to ``base_url/prefix<file name>``."""
    registry = sources.load_registry()
    for entry in registry.values():
        for spec in entry["files"]:
            if spec.get("url"):
                spec["url"] = f"{base_url}/{prefix}{spec['name']}"
        if entry.get("archive"):
            entry["archive"]["url"] = f"{base_url}/{prefix}MUTAG.zip"
    monkeypatch.setattr(sources, "load_registry", lambda: sources.copy.deepcopy(registry))
    return registry


def sha256(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def leftovers(folder: pathlib.Path) -> list:
    return sorted(p.name for p in folder.rglob("*.part")) if folder.exists() else []


# --------------------------------------------------------------------------- registry


def test_registry_lists_every_shared_file_with_the_readme_checksum(shared_data):
    readme = (shared_data / "README.md").read_text()
    published = dict(
        (path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})\s+\./(\S+)$", readme, re.M)
    )
    assert len(published) == 20
    registry = sources.load_registry()
    known = {}
    for entry in registry.values():
        for spec in entry["files"]:
            known[f"{entry['folder']}/{spec['name']}"] = spec["sha256"]
    listed = {path for path in published if not path.endswith("reuters_topics.json")}
    assert listed <= set(known), sorted(listed - set(known))
    for path in listed:
        assert published[path] in known[path], path
        # and the shared copy really has that checksum
        assert sources.file_sha256(shared_data / path) == published[path]


def test_registry_entries_are_complete():
    registry = sources.load_registry()
    assert set(registry) == {"reuters", "esol", "freesolv", "lipophilicity", "mutag", "cora"}
    for name, entry in registry.items():
        for key in ("title", "folder", "homepage", "licence", "citation", "files"):
            assert entry.get(key), (name, key)
        for spec in entry["files"]:
            assert spec.get("sha256") or spec.get("md5"), (name, spec["name"])
            url = spec.get("url") or entry["archive"]["url"]
            assert url.startswith("https://"), url
    # the Keras-published checksum of reuters.npz is the one Keras' get_file checks
    assert (
        "d6586e694ee56d7a4e65172e12b3e987c03096cb01eab99753921ef915959916"
        in registry["reuters"]["files"][0]["sha256"]
    )


def test_unknown_dataset_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="Known datasets: cora, esol"):
        sources.dataset_path("imdb")


# --------------------------------------------------------------------------- resolution


def _copy_freesolv(shared_data, root: pathlib.Path) -> pathlib.Path:
    (root / "molecules").mkdir(parents=True)
    shutil.copy(shared_data / "molecules" / "SAMPL.csv", root / "molecules")
    return root / "molecules"


def test_resolution_order_data_dir_then_env_then_cache(shared_data, tmp_path, env, monkeypatch):
    monkeypatch.setenv("LABLIB_OFFLINE", "1")
    explicit = _copy_freesolv(shared_data, tmp_path / "explicit")
    from_env = _copy_freesolv(shared_data, tmp_path / "env")
    cached = _copy_freesolv(shared_data, env)
    monkeypatch.setenv("LABLIB_DATA_DIR", str(tmp_path / "env"))
    assert sources.dataset_path("freesolv", data_dir=tmp_path / "explicit") == explicit
    assert sources.dataset_path("freesolv") == from_env
    # a data_dir without the dataset falls through to the next place
    empty = tmp_path / "empty"
    empty.mkdir()
    assert sources.dataset_path("freesolv", data_dir=empty) == from_env
    monkeypatch.delenv("LABLIB_DATA_DIR")
    assert sources.dataset_path("freesolv") == cached


def test_data_dir_may_name_the_dataset_folder_itself(shared_data, env):
    assert (
        sources.dataset_path("reuters", data_dir=shared_data / "reuters") == shared_data / "reuters"
    )
    assert (
        sources.dataset_path("mutag", data_dir=shared_data) == shared_data / "molecules" / "MUTAG"
    )
    assert (
        sources.dataset_path("mutag", data_dir=shared_data / "molecules")
        == shared_data / "molecules" / "MUTAG"
    )
    assert (
        sources.dataset_path("esol", data_dir=shared_data / "molecules")
        == shared_data / "molecules"
    )


def test_missing_data_dir_is_an_error_not_a_silent_download(tmp_path, env):
    with pytest.raises(DataNotFoundError, match="is not a folder"):
        sources.dataset_path("cora", data_dir=tmp_path / "typo")


def test_user_file_with_unknown_checksum_is_used_with_a_warning(shared_data, tmp_path, env):
    folder = _copy_freesolv(shared_data, tmp_path / "mine")
    with open(folder / "SAMPL.csv", "a") as handle:
        handle.write("extra,row,1,2\n")
    with pytest.warns(UserWarning, match="match no published checksum"):
        assert sources.dataset_path("freesolv", data_dir=tmp_path / "mine") == folder


def test_dataset_status_on_the_shared_folder(shared_data, env):
    rows = {row["name"]: row for row in sources.dataset_status(shared_data)}
    assert list(rows) == sources.dataset_names()
    for name, row in rows.items():
        assert row["found"] and row["source"] == "data_dir", name
        assert row["verified"] is True, (name, row["bad_files"])
        assert pathlib.Path(row["path"]).is_dir()
    assert rows["mutag"]["path"] == str(shared_data / "molecules" / "MUTAG")


def test_dataset_status_reports_missing_and_corrupt(shared_data, tmp_path, env):
    _copy_freesolv(shared_data, env)
    (env / "molecules" / "SAMPL.csv").write_text("smiles,expt\nCCO,1.0\n")
    rows = {row["name"]: row for row in sources.dataset_status(tmp_path)}
    assert rows["cora"]["found"] is False and rows["cora"]["source"] is None
    assert "ind.cora.graph" in rows["cora"]["missing_files"]
    assert rows["cora"]["urls"][0].startswith("https://github.com/kimiyoung/planetoid")
    assert rows["freesolv"]["source"] == "cache"
    assert rows["freesolv"]["verified"] is False and rows["freesolv"]["bad_files"] == ["SAMPL.csv"]


# --------------------------------------------------------------------------- downloads


def test_good_download_is_verified_and_cached(shared_data, env, server, monkeypatch):
    for path in (shared_data / "cora").iterdir():
        shutil.copy(path, server.root)
    point_registry_at(monkeypatch, server.url)
    folder = sources.dataset_path("cora")
    assert folder == env / "cora"
    assert len(server.requests) == 8
    for path in (shared_data / "cora").iterdir():
        assert sha256(folder / path.name) == sha256(path)
    assert leftovers(env) == []
    # second call: served from the cache, no request
    assert sources.dataset_path("cora") == folder
    assert len(server.requests) == 8
    assert {row["name"]: row for row in sources.dataset_status()}["cora"]["source"] == "cache"


def test_corrupt_download_is_rejected_and_not_cached(shared_data, env, server, monkeypatch):
    data = bytearray((shared_data / "molecules" / "SAMPL.csv").read_bytes())
    data[100:110] = b"XXXXXXXXXX"
    (server.root / "SAMPL.csv").write_bytes(bytes(data))
    point_registry_at(monkeypatch, server.url)
    with pytest.raises(ChecksumError) as caught:
        sources.dataset_path("freesolv")
    message = str(caught.value)
    assert "SAMPL.csv" in message and server.url in message
    assert sha256(server.root / "SAMPL.csv") in message
    assert "discarded" in message
    assert isinstance(caught.value, ValueError)  # reported like other bad-input errors (CLI)
    assert not (env / "molecules" / "SAMPL.csv").exists()
    assert leftovers(env) == []


def test_short_download_is_rejected(shared_data, env, server, monkeypatch):
    shutil.copy(shared_data / "molecules" / "SAMPL.csv", server.root)
    point_registry_at(monkeypatch, server.url, prefix="short/")
    with pytest.raises(ChecksumError, match=r"stopped after 16030 of 32060 bytes") as caught:
        sources.dataset_path("freesolv")
    assert "SAMPL.csv" in str(caught.value)
    assert not (env / "molecules" / "SAMPL.csv").exists()
    assert leftovers(env) == []


def test_truncated_cached_file_is_fetched_again(shared_data, env, server, monkeypatch):
    (env / "cora").mkdir(parents=True)
    for path in (shared_data / "cora").iterdir():
        shutil.copy(path, server.root)
        shutil.copy(path, env / "cora")
    broken = env / "cora" / "ind.cora.allx"
    broken.write_bytes(broken.read_bytes()[:1000])
    point_registry_at(monkeypatch, server.url)
    assert sources.dataset_path("cora") == env / "cora"
    assert server.requests == ["/ind.cora.allx"]  # only the bad file is fetched
    assert sha256(broken) == sha256(shared_data / "cora" / "ind.cora.allx")


def test_fetch_dataset_into_a_data_dir(shared_data, tmp_path, env, server, monkeypatch):
    shutil.copy(shared_data / "molecules" / "SAMPL.csv", server.root)
    point_registry_at(monkeypatch, server.url)
    target = tmp_path / "data"
    assert sources.fetch_dataset("freesolv", data_dir=target) == target / "molecules"
    assert sha256(target / "molecules" / "SAMPL.csv") == sha256(
        shared_data / "molecules" / "SAMPL.csv"
    )
    assert sources.fetch_dataset("freesolv", data_dir=target) == target / "molecules"
    assert len(server.requests) == 1
    assert not (env / "molecules").exists()  # nothing went to the cache


def test_archive_download_extracts_and_verifies_each_file(shared_data, env, server, monkeypatch):
    with zipfile.ZipFile(server.root / "MUTAG.zip", "w") as bundle:
        for path in (shared_data / "molecules" / "MUTAG").iterdir():
            bundle.write(path, f"MUTAG/{path.name}")
    point_registry_at(monkeypatch, server.url)
    folder = sources.fetch_dataset("mutag")
    assert folder == env / "molecules" / "MUTAG"
    for path in (shared_data / "molecules" / "MUTAG").iterdir():
        assert sha256(folder / path.name) == sha256(path)
    assert not list(folder.glob("*.zip")) and leftovers(env) == []


def test_archive_with_a_corrupt_member_is_rejected(shared_data, env, server, monkeypatch):
    with zipfile.ZipFile(server.root / "MUTAG.zip", "w") as bundle:
        for path in (shared_data / "molecules" / "MUTAG").iterdir():
            data = path.read_bytes()
            if path.name == "MUTAG_graph_labels.txt":
                data = data.replace(b"-1", b"1", 1)
            bundle.writestr(f"MUTAG/{path.name}", data)
    point_registry_at(monkeypatch, server.url)
    with pytest.raises(ChecksumError, match="MUTAG_graph_labels.txt"):
        sources.fetch_dataset("mutag")
    assert not (env / "molecules" / "MUTAG" / "MUTAG_graph_labels.txt").exists()
    assert leftovers(env) == []


# --------------------------------------------------------------------------- offline


def test_offline_error_names_every_way_to_provide_the_files(tmp_path, env, monkeypatch):
    with LocalServer(tmp_path) as stopped:
        url = stopped.url
    point_registry_at(monkeypatch, url)  # nothing listens there any more
    with pytest.raises(DataNotFoundError) as caught:
        sources.dataset_path("cora", data_dir=tmp_path)
    message = str(caught.value)
    assert "data_dir" in message
    assert "LABLIB_DATA_DIR" in message
    assert str(env / "cora") in message
    assert f"{url}/ind.cora.graph" in message
    assert "lablib data fetch cora" in message
    assert "ind.cora.test.index" in message  # the files needed
    assert str(tmp_path / "cora") in message  # where it looked
    assert "failed" in message and "Connection refused" in message
    assert not (env / "cora").exists() or leftovers(env) == []


def test_offline_flag_never_touches_the_network(env, server, monkeypatch):
    point_registry_at(monkeypatch, server.url)
    monkeypatch.setenv("LABLIB_OFFLINE", "1")
    with pytest.raises(DataNotFoundError, match="LABLIB_OFFLINE=1"):
        sources.dataset_path("reuters")
    assert server.requests == []


def test_loader_downloads_end_to_end(shared_data, env, server, monkeypatch):
    """A loader with no data folder anywhere downloads, verifies, caches and loads."""
    from lablib.data import load_cora

    for path in (shared_data / "cora").iterdir():
        shutil.copy(path, server.root)
    point_registry_at(monkeypatch, server.url)
    cora = load_cora()
    assert cora.x.shape == (2708, 1433)
    assert (env / "cora" / "ind.cora.graph").is_file()


def test_a_cache_that_cannot_be_written_says_what_to_set(env, monkeypatch):
    """A home or cache folder that cannot be written (a read-only home, a file where the
    folder would be) ended in a bare FileNotFoundError or NotADirectoryError traceback,
    without lablib's advice. It is a DataNotFoundError naming the folder and the variable
    to set; nothing was downloaded."""
    env.parent.mkdir(parents=True, exist_ok=True)
    env.write_text("a file, not a folder")
    with pytest.raises(sources.DataNotFoundError) as refused:
        sources.dataset_path("cora")
    said = str(refused.value)
    assert f"the folder {env / 'cora'} cannot be written" in said
    assert "set LABLIB_CACHE_DIR to a folder you can write" in said
    env.unlink()
    env.mkdir()  # a folder that is there but read-only (root writes anywhere: as if not)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sources.tempfile, "TemporaryFile", read_only)
    with pytest.raises(sources.DataNotFoundError, match="cannot be written \\(Permission denied"):
        sources.dataset_path("cora")
    with pytest.raises(sources.DataNotFoundError, match="give a data folder you can write"):
        sources.fetch_dataset("cora", env.parent / "elsewhere")
