# The changes run_lib.sh broken builds into the kernels (each taken at run time when ZT_PLANT names it, see
# emu::planted): one constant in each optimizer family, and one missing barrier. Each must be caught by the
# checks of its program, and only by the checks named: a wrong kernel shows, and shows where it is.
#   plant.py apply KERNEL FILE: rewrites FILE (kernels/KERNEL.cu after launch_rewrite.py) with KERNEL's changes.
#   plant.py list: one line per change: name, program, the word each failure's message starts with ("-": the
#                  program checks that family alone).
import sys

# name, kernel, program, first word of each failure, text in kernels/<kernel>.cu, text when planted
PLANTS = [
    ("adam", "adam", "test_kernels_cuda", "adam", "op.omb2 = __fsub_rn(1.0f, s.b2);", "op.omb2 = __fsub_rn(1.0f, s.b1);"),
    ("lion", "lion", "test_kernels_cuda", "lion", "s.omb2 = 1.0f - h->beta2;", "s.omb2 = 1.0f - h->beta1;"),
    ("lamb", "lamb", "test_kernels_lamb_cuda", "-", "s.eps = h->eps;", "s.eps = 2 * h->eps;"),
    # the barrier between the threads' partial sums and the block's tree: thread 0 then adds partials that
    # the others have not written yet (the fibers run in order, each as far as it can)
    ("barrier", "grad_stats", "test_kernels_cuda", "stats", "b[threadIdx.x] = op.bad;\n    __syncthreads();",
     "b[threadIdx.x] = op.bad;"),
]

if sys.argv[1] == "list":
    for name, _, prog, first, _, _ in PLANTS:
        print(name, prog, first)
else:
    kernel, path = sys.argv[2], sys.argv[3]
    s = open(path).read()
    for name, k, _, _, old, new in PLANTS:
        if k != kernel:
            continue
        if s.count(old) != 1:
            sys.exit("plant.py: %r is not once in kernels/%s.cu: update the change %r" % (old, kernel, name))
        s = s.replace(old, 'if (emu::planted("%s")) { %s } else { %s }' % (name, new, old))
    open(path, "w").write(s)
