"""asv's dashboard without a network: the scripts and styles its index.html loads from CDNs, served
from the published folder instead.

GPU clusters are mostly air-gapped, and there a page that loads jQuery and Flot from a CDN is blank.
The files come from the npm registry at the versions asv 0.6 pins (www/vendor.json: package,
version, file in the package, sha256, asv's own integrity hash where npm ships the very file asv
pins), with their licences, and are committed under www/vendor/ so that nothing is fetched where the
dashboard is published. `bin/vendor-dashboard` fetches them again and checks every checksum.

    localize(html_dir)   after `asv publish` (the project's asv plugin calls it): copy the files,
                         point index.html's tags at them
    python -m nccl_bench.asv.offline localize html/   the same, by hand
    python -m nccl_bench.asv.offline fetch [--update] the files from npm (bin/vendor-dashboard)
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from nccl_bench.core.errors import UsageError

WWW = Path(__file__).with_name("www")
MANIFEST = WWW / "vendor.json"
VENDOR = WWW / "vendor"
# a <script src=...> or <link href=...> tag whose address is on the network
EXTERNAL_TAG = re.compile(r"<(script|link)\b[^>]*?\b(?:src|href)=\"(https?://[^\"]+)\"[^>]*>", re.I)
CDN_ONLY_ATTRS = re.compile(r"\s+(?:integrity|crossorigin|referrerpolicy)=\"[^\"]*\"", re.I)


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def files() -> list[dict]:
    return [dict(f, package=p["package"], version=p["version"]) for p in manifest()["packages"] for f in p["files"]]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sri_matches(path: Path, sri: str) -> bool:
    algo, _, want = sri.partition("-")
    return base64.b64encode(hashlib.new(algo, path.read_bytes()).digest()).decode() == want


# --- publishing --------------------------------------------------------------------------------------
def localize(html_dir: str | Path) -> list[str]:
    """Copy the vendored files into html_dir/vendor/ and point index.html at them. Returns the
    addresses index.html still loads from the network (none, unless asv's page changed)."""
    html = Path(html_dir)
    index = html / "index.html"
    if not index.is_file():
        raise UsageError(f"{html}: no index.html here (run `asv publish` first)")
    local = {f["url"]: "vendor/" + f["dest"] for f in files() if f["url"]}
    missing = [d for d in local.values() if not (WWW / d).is_file()]
    if missing:
        raise UsageError(f"{VENDOR}: {missing[0]} is missing (bin/vendor-dashboard fetches the files again)")
    shutil.copytree(VENDOR, html / "vendor", dirs_exist_ok=True)
    left: list[str] = []

    def point_home(m: re.Match) -> str:
        tag, url = m.group(0), m.group(2)
        if url not in local:
            left.append(url)
            return tag
        # integrity/crossorigin make a browser fetch the file as a CORS request, which a file:// page
        # refuses: a local copy needs neither
        return CDN_ONLY_ATTRS.sub("", tag.replace(url, local[url]))

    text = EXTERNAL_TAG.sub(point_home, index.read_text())
    index.write_text(text)
    return left


def external_loads(index_html: str) -> list[str]:
    """The addresses a page's script and link tags load from the network."""
    return [m.group(2) for m in EXTERNAL_TAG.finditer(index_html)]


# --- fetching ----------------------------------------------------------------------------------------
def fetch(update: bool = False, out: Path = VENDOR) -> list[str]:
    """Each package from the npm registry (`npm pack NAME@VERSION`), its files and licence into `out`.
    A file whose sha256 differs from the manifest's is an error, unless `update` records the new one.
    Returns one line per file."""
    if shutil.which("npm") is None:
        raise UsageError("fetch: npm is not installed (apt-get install npm)")
    doc, lines = manifest(), []
    with tempfile.TemporaryDirectory() as tmp:
        for pkg in doc["packages"]:
            spec = f"{pkg['package']}@{pkg['version']}"
            got = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", tmp],
                                 capture_output=True, text=True, timeout=300)
            if got.returncode != 0:
                raise UsageError(f"fetch: npm pack {spec} failed: {got.stderr.strip().splitlines()[-1:]}")
            unpacked = Path(tmp) / pkg["package"]
            with tarfile.open(Path(tmp) / got.stdout.strip().splitlines()[-1]) as tar:
                tar.extractall(unpacked, filter="data")
            root = unpacked / "package"
            first_dest = Path(pkg["files"][0]["dest"]).parts[0]
            (out / first_dest).mkdir(parents=True, exist_ok=True)
            if pkg["license_file"]:
                shutil.copyfile(root / pkg["license_file"], out / first_dest / "LICENSE")
            else:  # the package ships no licence text: say what its package.json declares
                declared = json.loads((root / "package.json").read_text()).get("license")
                (out / first_dest / "LICENSE").write_text(
                    f"{spec}: licence '{declared}', as its package.json declares; the package ships no licence text.\n")
            for f in pkg["files"]:
                dest = out / f["dest"]
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / f["file"], dest)
                digest = sha256(dest)
                if f["sha256"] != digest:
                    if not update:
                        raise UsageError(f"fetch: {spec} {f['file']}: sha256 {digest}, the manifest says "
                                         f"{f['sha256'] or 'nothing'} (--update records it)")
                    f["sha256"] = digest
                if f.get("sri") and not sri_matches(dest, f["sri"]):
                    raise UsageError(f"fetch: {spec} {f['file']} is not the file asv pins ({f['sri']})")
                lines.append(f"{spec} {f['file']} -> vendor/{f['dest']} sha256 {digest[:16]}"
                             + (" = asv's pin" if f.get("sri") else ""))
    if update:
        MANIFEST.write_text(json.dumps(doc, indent=1) + "\n")
    return lines


def main(argv: list[str]) -> int:
    if argv[:1] == ["fetch"] and set(argv[1:]) <= {"--update"}:
        for line in fetch(update="--update" in argv):
            print(line)
        return 0
    if argv[:1] == ["localize"] and len(argv) == 2:
        left = localize(argv[1])
        print(f"{argv[1]}: the dashboard loads its scripts from vendor/"
              + (f"; still from the network: {', '.join(left)}" if left else ""))
        return 1 if left else 0
    raise UsageError("usage: python -m nccl_bench.asv.offline fetch [--update] | localize HTML_DIR")


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
