# Sourced by the tools that write a generated file into docs/, from the
# repository's root: `. tools/lib/docs-build.sh NAME` refuses a working tree
# with changes outside docs/ (the file names the commit that wrote it),
# sets commit to that commit, tmp to a folder removed at exit, and builds
# gpuledger into $tmp/gpuledger.
docs_build_name=${1:?usage: . tools/lib/docs-build.sh NAME}
commit=$(git rev-parse --short HEAD)
if [ -n "$(git status --porcelain -- ':!docs')" ]; then
	echo "$docs_build_name: the working tree has changes outside docs/; commit them so that the file names the code that wrote it" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gpuledger" ./cmd/gpuledger
