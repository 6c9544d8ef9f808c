# Prints, per function of a manifest, the inputs that carry the frontend's
# keys ("name", "aliases", "role" tokens/targets, "vocab"): index, name,
# aliases and role[vocab], so a test checks where they survived.
import json
import sys

d = json.load(open(sys.argv[1]))
for f in d["functions"]:
    items = []
    for i, t in enumerate(f["inputs"]):
        if "name" in t:
            s = "%d=%s" % (i, t["name"])
            if "aliases" in t:
                s += "+" + "+".join(t["aliases"])
            items.append(s)
        if t.get("role") in ("tokens", "targets"):
            items.append("%d:%s[%d]" % (i, t["role"], t["vocab"]))
    print("%s (%d inputs): %s" % (f["name"], len(f["inputs"]), " ".join(items)))
