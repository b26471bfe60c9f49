#!/usr/bin/env bash
# Assembles each PTX file of a directory with ptxas -v and prints one line
# per function: OK when ptxas reports 0 spill bytes and no performance
# warning, FAIL with ptxas's report otherwise.
set -u
ptxas=$1
dir=$2
for ptx in "$dir"/*.ptx; do
  if ! log=$("$ptxas" -arch=sm_90a -v "$ptx" -o /dev/null 2>&1); then
    echo "FAIL $(basename "$ptx" .ptx): ptxas error"; echo "$log"; continue
  fi
  echo "$log" | grep -qiE 'warning|serializ' && { echo "FAIL $(basename "$ptx" .ptx): ptxas warning"; echo "$log"; }
  # "Function properties for NAME" is followed by its stack / spill line
  echo "$log" | awk '
    /Function properties for/ { name = $NF; next }
    name != "" && /spill stores/ {
      if ($0 ~ / 0 bytes spill stores, 0 bytes spill loads/) print "OK " name
      else print "FAIL " name ": " $0
      name = ""
    }'
done
