#!/bin/bash
# A copy of this checkout's HEAD for a machine that gets the tree without its .git (a GPU node
# reaching no git server, the device machine's copy): the committed files, and .signoff-commit
# with `git describe` of HEAD, so the runs made from the copy name the commit they ran
# (signoff.report.suite_version: '0.1.0 (git 3d6d4e0)', not '0.1.0' or 'unknown').
#
#   bench/copy_tree.sh DEST      DEST is emptied first
set -eu
dest=${1:?DEST}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$dest" && mkdir -p "$dest"
git -C "$root" archive --format=tar HEAD | tar -x -C "$dest"
git -C "$root" describe --always --tags HEAD > "$dest/.signoff-commit"
echo "$dest: $(cat "$dest/.signoff-commit")"
