#!/usr/bin/env bash
# Keep the real student's evaluation records across machines.
#
# The full rows take many hours on 2 cores, longer than one working session, and runs/ is not in
# git. `save` copies every label's records (runs/student/eval*/LABEL/*.jsonl and the model.json
# stamp) into bench_out/student_records/; `restore` copies them back into a fresh clone's
# runs/student, never over a longer file. `botpsy eval` then resumes where the records stop: the
# stamp holds the model's sha256 (or its base name) and the generation settings, so the records
# are reused only for the same bytes, e.g. an adapter file re-exported from the committed adapter.
#
#   bash bench/student_records.sh save      # before a session ends
#   bash bench/student_records.sh restore   # after set-up on a new machine
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/student}
STORE=${STORE:-bench_out/student_records}

copy_newer() {  # copy $1 to $2 unless $2 already has at least as many lines
  local src=$1 dst=$2
  if [[ -f $dst && $(wc -l <"$dst") -ge $(wc -l <"$src") ]]; then return; fi
  mkdir -p "$(dirname "$dst")"
  cp -p "$src" "$dst"
  echo "  $dst ($(wc -l <"$src") lines)"
}

copy_label() {  # copy_label SRC_DIR DST_DIR MODE: one label's records and stamp
  local src=$1 dst=$2 mode=$3
  if [[ -f $dst/model.json ]] && ! cmp -s "$src/model.json" "$dst/model.json"; then
    if [[ $mode == restore ]]; then  # the run holds records of another model or settings: leave them
      echo "  skipped $dst: its records were made with another model or settings" >&2
      return
    fi
    rm -r "$dst"  # save: the live run is the truth (the stamp was renewed or the model rebuilt)
  fi
  mkdir -p "$dst"
  cp -p "$src/model.json" "$dst/model.json"
  for f in "$src"/*.jsonl; do [[ -f $f ]] && copy_newer "$f" "$dst/$(basename "$f")"; done
  return 0
}

case "${1:-}" in
  save)
    for dir in "$RUN"/eval*/*/; do
      dir=${dir%/}
      # a linked label folder (a table built from another run's records) is saved where it points
      [[ $dir == *.stale || -L $dir || ! -f $dir/model.json ]] && continue
      copy_label "$dir" "$STORE/${dir#"$RUN"/}" save
    done ;;
  restore)
    [[ -d $STORE ]] || { echo "nothing saved in $STORE" >&2; exit 1; }
    for dir in "$STORE"/eval*/*/; do
      dir=${dir%/}
      [[ -f $dir/model.json ]] || continue
      copy_label "$dir" "$RUN/${dir#"$STORE"/}" restore
    done ;;
  *) echo "usage: bash bench/student_records.sh save|restore" >&2; exit 2 ;;
esac
