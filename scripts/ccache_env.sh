# Sourced by the build scripts: ccache shares objects between checkouts (CI clones, worktrees,
# tests/install's fresh root) when paths are taken relative to the checkout's parent and the
# compiler is compared by content, not by mtime.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$here")}"
export CCACHE_COMPILERCHECK="${CCACHE_COMPILERCHECK:-content}"
