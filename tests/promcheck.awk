# promcheck.awk - checks a Prometheus text exposition (format 0.0.4)
# strictly, as tests/metrics.sh scrapes it: every sample's family has one
# HELP and one TYPE line before its samples; names and labels are valid;
# values are numbers; counters end in _total; no sample repeats; a
# histogram's buckets have increasing bounds and cumulative counts, the
# last one le="+Inf" equal to _count, and _sum and _count are there.
# Prints one line per problem and exits 1 if there was any.
function problem(msg) { print "promcheck: line " NR ": " msg; bad = 1 }
function valid_name(n) { return n ~ /^[a-zA-Z_:][a-zA-Z0-9_:]*$/ }
function valid_value(v) {
  return v ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ || v ~ /^[-+]?Inf$/ || v == "NaN"
}
function family_of(name,   base) {
  if (name in type) return name
  base = name
  if (sub(/_(bucket|sum|count)$/, "", base) && type[base] ~ /^(histogram|summary)$/) return base
  return ""
}
/^# HELP / {
  if (!valid_name($3)) problem("bad name in HELP: " $3)
  if ($3 in help) problem("second HELP for " $3)
  help[$3] = 1; next
}
/^# TYPE / {
  if (!valid_name($3)) problem("bad name in TYPE: " $3)
  if ($3 in type) problem("second TYPE for " $3)
  if ($4 !~ /^(counter|gauge|histogram|summary|untyped)$/) problem("bad type " $4)
  if ($4 == "counter" && $3 !~ /_total$/) problem("counter " $3 " does not end in _total")
  if (seen_samples[$3]) problem("TYPE for " $3 " after its samples")
  type[$3] = $4; next
}
/^#/ { next }
/^[ \t]*$/ { next }
{
  line = $0
  if (!match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*/)) { problem("no metric name: " line); next }
  name = substr(line, 1, RLENGTH); rest = substr(line, RLENGTH + 1)
  labels = ""
  if (substr(rest, 1, 1) == "{") {
    end = index(rest, "}")
    if (!end) { problem("unclosed labels: " line); next }
    labels = substr(rest, 2, end - 2); rest = substr(rest, end + 1)
    tmp = labels
    while (tmp != "") {
      if (!match(tmp, /^[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"/)) { problem("bad labels: {" labels "}"); break }
      tmp = substr(tmp, RLENGTH + 1)
      if (substr(tmp, 1, 1) == ",") tmp = substr(tmp, 2); else if (tmp != "") { problem("bad labels: {" labels "}"); break }
    }
  }
  if (rest !~ /^ [^ ]+$/) { problem("not NAME[{LABELS}] VALUE: " line); next }
  value = substr(rest, 2)
  if (!valid_value(value)) problem("bad value: " line)
  fam = family_of(name)
  if (fam == "") { problem("sample without HELP/TYPE: " name); next }
  if (!(fam in help)) problem("no HELP for " fam)
  seen_samples[fam] = 1
  key = name "{" labels "}"
  if (key in samples) problem("repeated sample " key)
  samples[key] = value
  if (type[fam] == "histogram") {
    series = labels; le = ""
    if (match(series, /(^|,)le="[^"]*"/)) {
      le = substr(series, RSTART, RLENGTH); sub(/^,/, "", le); sub(/^le="/, "", le); sub(/"$/, "", le)
      series = substr(series, 1, RSTART - 1) substr(series, RSTART + RLENGTH); sub(/^,/, "", series)
    }
    s = fam "{" series "}"
    if (name == fam "_bucket") {
      if (le == "") { problem("bucket without le: " line); next }
      bound = le == "+Inf" ? "inf" : le + 0
      if ((s in last_le) && (last_le[s] == "inf" || (bound != "inf" && bound <= last_le[s]))) problem("bucket bounds not increasing: " line)
      if ((s in last_count) && value + 0 < last_count[s]) problem("buckets not cumulative: " line)
      last_le[s] = bound; last_count[s] = value + 0
      if (le == "+Inf") inf[s] = value + 0
      hists[s] = 1
    } else if (name == fam "_count") count[s] = value + 0
    else if (name == fam "_sum") sum[s] = 1
  }
}
END {
  for (s in hists) {
    if (!(s in inf)) problem("histogram " s " has no le=\"+Inf\" bucket")
    else if (!(s in count)) problem("histogram " s " has no _count")
    else if (inf[s] != count[s]) problem("histogram " s ": +Inf bucket " inf[s] " != _count " count[s])
    if (!(s in sum)) problem("histogram " s " has no _sum")
  }
  for (f in type) if (!(f in help)) problem("no HELP for " f)
  exit bad
}
