# CUDA on CPU threads (see run.sh): rewrites a .cu file for a host C++ compiler. kernel<<<cfg>>>(args) becomes
# emu::launch(cfg)([=] { kernel(args); }), and the dynamic shared array a pointer to the launch's buffer.
# usage: launch_rewrite.py IN.cu OUT.cpp
import re, sys
s = open(sys.argv[1]).read()
s = s.replace("extern __shared__ float sm[];", "float *sm = emu::dyn_smem<float>();")
out, i = [], 0
while True:
    j = s.find("<<<", i)
    if j < 0:
        out.append(s[i:]); break
    m = re.search(r"([A-Za-z_]\w*(?:<[^<>]*>)?)$", s[i:j])
    name_start = i + m.start(1)
    k = s.find(">>>", j)
    cfg = s[j + 3:k]
    assert s[k + 3] == "("
    depth, p = 0, k + 3
    while True:
        if s[p] == "(": depth += 1
        elif s[p] == ")":
            depth -= 1
            if depth == 0: break
        p += 1
    args = s[k + 4:p]
    out.append(s[i:name_start])
    out.append("emu::launch(%s)([=] { %s(%s); })" % (cfg, m.group(1), args))
    i = p + 1
open(sys.argv[2], "w").write("".join(out))
