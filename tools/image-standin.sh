# shellcheck shell=bash
# The recipes of the image's base stand-ins (tools/image_bases.py sources this file and runs one of them under
# bash; none of it runs on its own). They are shell as they run: debootstrap, chroot, dpkg-deb, tar and
# podman, with the few steps in Python that pick files out of a root file system. Each recipe's text, as
# bash prints it (declare -f), is part of its stand-in's cache key: change a recipe and its stand-in is
# made again. They read $cache, the image cache directory the build passes in.


# The recipe. Its text is part of the cache key: change it and the stand-in is made again.
make_standin() {
  local rootfs=$1 mirror=$2
  # debootstrap does not resolve virtual packages: python3.11-venv needs python3.11-distutils, which
  # python3-distutils provides.
  mkdir -p "$cache/debs"
  debootstrap --variant=minbase --cache-dir="$cache/debs" \
    --include=ca-certificates,netbase,tzdata,python3.11,python3.11-venv,python3-distutils,python3-lib2to3,python3-pip-whl,python3-setuptools-whl \
    bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || { tail -20 "$cache/debootstrap.log" >&2; return 1; }
  # debian:bookworm-slim's settings (debuerreotype --slimify, and the apt/dpkg files of Docker's Debian
  # images), then the slim image's deletions applied to what debootstrap already unpacked.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'APT::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d" && chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    >"$rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$rootfs/etc/apt/sources.list"
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,info,groff,linda,lintian/overrides}/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* \
    "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  # python:3.11-slim's Python lives in /usr/local (python, python3, pip in /usr/local/bin, site-packages in
  # /usr/local/lib/python3.11/site-packages, not externally managed): Debian's python3.11 with /usr/local
  # made a virtualenv gives the same paths.
  chroot "$rootfs" /usr/bin/python3.11 -m venv /usr/local >"$cache/venv.log" 2>&1 || { cat "$cache/venv.log" >&2; return 1; }
  find "$rootfs/usr/local" -name __pycache__ -prune -exec rm -rf {} +
}

# The distroless stand-in: what gcr.io/distroless/python3-debian12 is made of, from a debootstrap of
# bookworm (its maintainer scripts make the CA bundle; only the packages' own files, the bundle and
# distroless's few files of its own reach the image). Its text is part of its cache key.
distroless_packages="base-files netbase tzdata libc6 libgcc-s1 libgomp1 libstdc++6 libssl3 zlib1g
  python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libbz2-1.0 libcom-err2 libcrypt1 libdb5.3
  libexpat1 libffi8 libgssapi-krb5-2 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 liblzma5 libmpdec3
  libncursesw6 libnsl2 libreadline8 libsqlite3-0 libtinfo6 libtirpc3 libtirpc-common libuuid1 media-types"
make_distroless_standin() {
  local rootfs=$1 mirror=$2 out=$3
  mkdir -p "$cache/debs"
  debootstrap --variant=minbase --cache-dir="$cache/debs" \
    --include=ca-certificates,netbase,tzdata,python3.11-minimal,libpython3.11-stdlib,libgomp1 \
    bookworm "$rootfs" "$mirror" >"$cache/debootstrap-distroless.log" 2>&1 \
    || { tail -20 "$cache/debootstrap-distroless.log" >&2; return 1; }
  python3 - "$rootfs" "$out" $distroless_packages <<'PY'
import os, shutil, stat, sys
rootfs, out, packages = sys.argv[1], sys.argv[2], sys.argv[3:]
info = os.path.join(rootfs, "var/lib/dpkg/info")
skip = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/lintian/", "/usr/share/locale/")

def stanzas(path):  # dpkg's status file: one stanza per package, separated by blank lines
    with open(path, encoding="utf-8") as handle:
        return [block for block in handle.read().split("\n\n") if block.strip()]

status = {}
for block in stanzas(os.path.join(rootfs, "var/lib/dpkg/status")):
    fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(" "))
    status[fields.get("Package")] = block.strip("\n") + "\n"

def real(path):  # a path inside rootfs with its directories resolved (merged /usr: /lib -> usr/lib)
    parent = os.path.realpath(os.path.join(rootfs, os.path.dirname(path).lstrip("/")))
    assert parent == rootfs or parent.startswith(rootfs + "/"), path
    return os.path.join(parent, os.path.basename(path))

def copy(source):
    target = os.path.join(out, os.path.relpath(source, rootfs))
    if os.path.lexists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    mode = os.lstat(source).st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISDIR(mode):
        os.makedirs(target, exist_ok=True)
        os.chmod(target, stat.S_IMODE(mode))
    else:
        shutil.copy2(source, target)

for name in packages:
    lists = [f for f in (f"{name}.list", f"{name}:amd64.list", f"{name}:arm64.list") if os.path.exists(os.path.join(info, f))]
    if not lists:  # not a dependency of python3.11 in this release (libmpdec3: _decimal is built in)
        print(f"distroless stand-in: {name} is not installed, left out", file=sys.stderr)
        continue
    # distroless records each package it is made of as /var/lib/dpkg/status.d/<package> (dpkg's stanza, no
    # dpkg in the image), so scanners and SBOM tools find them, and keeps each one's copyright file.
    os.makedirs(os.path.join(out, "var/lib/dpkg/status.d"), exist_ok=True)
    with open(os.path.join(out, "var/lib/dpkg/status.d", name), "w", encoding="utf-8") as handle:
        handle.write(status[name])
    for line in open(os.path.join(info, lists[0]), encoding="utf-8"):
        path = line.rstrip("\n")
        if path in ("/.", "") or (path.startswith(skip) and path != f"/usr/share/doc/{name}/copyright"):
            continue
        source = real(path)
        if os.path.lexists(source):
            copy(source)
for link in ("bin", "sbin", "lib", "lib64"):  # merged /usr: the top-level links (the loader is /lib64/...)
    if os.path.islink(os.path.join(rootfs, link)):
        copy(os.path.join(rootfs, link))
copy(os.path.join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
for name in ("python3", "python"):
    os.symlink("python3.11", os.path.join(out, "usr/bin", name))
# distroless's own files: its users (root, nobody, nonroot), their groups, name resolution, /tmp and homes.
files = {
    "etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
                  "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    "etc/group": "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
    "etc/nsswitch.conf": "passwd:         files\ngroup:          files\nshadow:         files\n\n"
                         "hosts:          files dns\nnetworks:       files\n\nprotocols:      files\nservices:       files\n"
                         "ethers:         files\nrpc:            files\n",
}
for path, text in files.items():
    with open(os.path.join(out, path), "w", encoding="utf-8") as handle:
        handle.write(text)
for path, mode in (("tmp", 0o1777), ("root", 0o700), ("home/nonroot", 0o700)):
    os.makedirs(os.path.join(out, path), exist_ok=True)
    os.chmod(os.path.join(out, path), mode)
os.chown(os.path.join(out, "home/nonroot"), 65532, 65532)
PY
}

# The final base's stand-in for another architecture, made without running anything of it: the packages
# of the build platform's stand-in ($distroless_packages), downloaded for that architecture by debootstrap
# (--download-only: no second stage, no maintainer script, no emulation) and unpacked with dpkg-deb onto
# merged /usr; the files no package holds as they are (the CA bundle, made by ca-certificates' maintainer
# script, and distroless's /etc/passwd, /etc/group and /etc/nsswitch.conf; none depends on the
# architecture) are copied from the build platform's stand-in. Its text is part of its cache key.
make_foreign_distroless_standin() {
  local arch=$1 rootfs=$2 mirror=$3 out=$4 native=$5
  mkdir -p "$cache/debs-$arch"
  debootstrap --arch="$arch" --variant=minbase --download-only --cache-dir="$cache/debs-$arch" \
    --include=ca-certificates,netbase,tzdata,python3.11-minimal,libpython3.11-stdlib,libgomp1 \
    bookworm "$rootfs" "$mirror" >"$cache/debootstrap-distroless-$arch.log" 2>&1 \
    || { tail -20 "$cache/debootstrap-distroless-$arch.log" >&2; return 1; }
  python3 - "$rootfs" "$out" "$arch" $distroless_packages <<'PY'
import os, shutil, stat, subprocess, sys, tempfile
rootfs, out, arch, packages = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
skip = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/lintian/", "/usr/share/locale/")
merged = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}  # Debian 12: merged /usr
debs = {}
for line in open(os.path.join(rootfs, "debootstrap/debpaths"), encoding="utf-8"):
    name, path = line.split()
    debs[name] = os.path.join(rootfs, path.lstrip("/"))

def place(rel):
    top, sep, rest = rel.partition("/")
    return merged[top] + sep + rest if top in merged else rel

for name in packages:
    if name not in debs:  # as in the build platform's stand-in (libmpdec3: _decimal is built in)
        print(f"distroless stand-in ({arch}): {name} is not a dependency here, left out", file=sys.stderr)
        continue
    # dpkg's record of the package in status.d and its copyright file, as distroless keeps them
    os.makedirs(os.path.join(out, "var/lib/dpkg/status.d"), exist_ok=True)
    with open(os.path.join(out, "var/lib/dpkg/status.d", name), "wb") as handle:
        handle.write(subprocess.run(["dpkg-deb", "-f", debs[name]], check=True, capture_output=True).stdout)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as unpacked:
        subprocess.run(["dpkg-deb", "-x", debs[name], unpacked], check=True)
        copyright_file = os.path.join(unpacked, "usr/share/doc", name, "copyright")
        if os.path.isfile(copyright_file):
            os.makedirs(os.path.join(out, "usr/share/doc", name), exist_ok=True)
            shutil.copy2(copyright_file, os.path.join(out, "usr/share/doc", name, "copyright"))
        for top, dirs, files in os.walk(unpacked):
            for entry in dirs + files:
                source = os.path.join(top, entry)
                rel = place(os.path.relpath(source, unpacked))
                target = os.path.join(out, rel)
                if ("/" + rel).startswith(skip) or os.path.lexists(target):
                    continue
                os.makedirs(os.path.dirname(target), exist_ok=True)
                mode = os.lstat(source).st_mode
                if stat.S_ISLNK(mode):
                    os.symlink(os.readlink(source), target)
                elif stat.S_ISDIR(mode):
                    os.makedirs(target)
                    os.chmod(target, stat.S_IMODE(mode))
                else:
                    shutil.copy2(source, target)
for link, real in merged.items():
    if os.path.isdir(os.path.join(out, real)):
        os.symlink(real, os.path.join(out, link))
for name in ("python3", "python"):
    os.symlink("python3.11", os.path.join(out, "usr/bin", name))
for path, mode in (("tmp", 0o1777), ("root", 0o700), ("home/nonroot", 0o700)):
    os.makedirs(os.path.join(out, path), exist_ok=True)
    os.chmod(os.path.join(out, path), mode)
os.chown(os.path.join(out, "home/nonroot"), 65532, 65532)
for path, link in (("var/run", "/run"), ("var/lock", "/run/lock")):  # base-files' maintainer script's links
    os.rmdir(os.path.join(out, path))
    os.symlink(link, os.path.join(out, path))
PY
  local name=pykured-standin-$$ path
  podman create -q --name "$name" "$native" >/dev/null
  for path in /etc/passwd /etc/group /etc/nsswitch.conf /etc/ssl/certs/ca-certificates.crt; do
    mkdir -p "$(dirname "$out$path")"
    podman cp "$name:$path" "$out$path" || { podman rm -f "$name" >/dev/null; return 1; }
  done
  podman rm -f "$name" >/dev/null
}
