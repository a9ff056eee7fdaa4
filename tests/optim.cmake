# Optimizers other than Adam (issue 14): Lion trained end to end against a float64 Lion at stages 0-3,
# on 1 and 2 ranks, with a checkpoint round trip; and the same on the CUDA emulation.
zinc_test(NAME engine_lion_np1 SOURCES test_engine_lion.c optim_engine.c engine_util.c LABELS engine)
zinc_test(NAME engine_lion_np2 SOURCES test_engine_lion.c optim_engine.c engine_util.c RANKS 2 LABELS engine)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_lion_cuda_emulated_np1 SOURCE test_engine_lion.c EXTRA optim_engine.c ENV ZINC_TEST_DEVICE=cuda)
endif()
# LAMB: the same against a float64 LAMB, on the cpu device, the cpu presented as a discrete device (the
# device passes with the norms in "device" memory, and the staged passes of the offloaded runs), and the
# CUDA emulation (1 rank; 2 ranks with a GPU each, over the emulated NCCL).
zinc_test(NAME engine_lamb_np1 SOURCES test_engine_lamb.c optim_engine.c engine_util.c LABELS engine)
zinc_test(NAME engine_lamb_np2 SOURCES test_engine_lamb.c optim_engine.c engine_util.c RANKS 2 LABELS engine)
zinc_test(NAME engine_lamb_discrete_np2 SOURCES test_engine_lamb.c optim_engine.c engine_util.c RANKS 2
          LABELS engine ENV ZINC_CPU_DISCRETE=1)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_lamb_cuda_emulated_np1 SOURCE test_engine_lamb.c EXTRA optim_engine.c ENV ZINC_TEST_DEVICE=cuda)
  zinc_emulated_test(NAME engine_lamb_cuda_emulated_nccl_np2 SOURCE test_engine_lamb.c EXTRA optim_engine.c RANKS 2
                     ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2)
endif()
# LAMB on device cuda against the same run on device cpu (test_engine_lamb_cuda.c): stages 0-3, fp32 / fp16
# with an overflow skipped / bf16, state on the device and offloaded. On the emulation bitwise, at 1 rank,
# 2 ranks with a GPU each (NCCL) and 2 ranks sharing one (MPI through small pinned staging); on a GPU
# (label gpu, skipped without one) within the stated tolerance.
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_lamb_vs_cpu_cuda_emulated_np1 SOURCE test_engine_lamb_cuda.c)
  zinc_emulated_test(NAME engine_lamb_vs_cpu_cuda_emulated_nccl_np2 SOURCE test_engine_lamb_cuda.c RANKS 2
                     ENV ZINC_CUDA_HOST_DEVICES=2)
  zinc_emulated_test(NAME engine_lamb_vs_cpu_cuda_emulated_shared_np2 SOURCE test_engine_lamb_cuda.c RANKS 2
                     ENV ZINC_STAGING_BYTES=4096)
endif()
if(ZINC_HAVE_CUDA)
  zinc_test(NAME engine_lamb_cuda SOURCES test_engine_lamb_cuda.c engine_util.c LABELS gpu engine TIMEOUT 600)
endif()
# The CUDA LAMB kernels (kernels/lamb.cu) against their CPU references: on a GPU (label gpu, skipped without
# one), and on the host emulation, where it tests the launchers' contract (the math there is the reference).
if(ZINC_HAVE_CUDA)
  zinc_test(NAME kernels_lamb_cuda SOURCES test_kernels_lamb_cuda.c LABELS gpu LIBS CUDA::cudart TIMEOUT 600)
endif()
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME kernels_lamb_cuda_emulated SOURCE test_kernels_lamb_cuda.c)
endif()
# Adagrad (DeepSpeedCPUAdagrad's formula), added through the optimizer recipe: the kernel against
# DeepSpeed's formula and float64, the engine at stages 0-3 against float64, its config and checkpoints;
# on the CUDA emulation offloaded (and refused with the state on the GPU).
zinc_test(NAME engine_adagrad SOURCES test_engine_adagrad.c optim_engine.c engine_util.c LABELS engine)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_adagrad_cuda_emulated SOURCE test_engine_adagrad.c EXTRA optim_engine.c
                     ENV ZINC_TEST_DEVICE=cuda)
endif()
# SGD (torch.optim.SGD's formula, every option), added through the optimizer recipe: the kernel against
# torch's formula and float64, the engine at stages 0-3 with the state in memory, offloaded to the CPU and on
# NVMe against float64 after every step, at 1 and 2 ranks; checkpoints resumed bitwise at the same rank
# count and, with zinc.deterministic_reduction, saved at 1 (2) ranks and resumed at 2 (1) (fixtures); its
# config; on the CUDA emulation offloaded (and refused with the state on the GPU).
zinc_test(NAME engine_sgd_np1 SOURCES test_engine_sgd.c optim_engine.c engine_util.c ARGS --tag np1 --save
          LABELS engine)
zinc_test(NAME engine_sgd_np2 SOURCES test_engine_sgd.c optim_engine.c engine_util.c RANKS 2 ARGS --tag np2 --save
          LABELS engine)
zinc_test(NAME engine_sgd_resume_np1 SOURCES test_engine_sgd.c optim_engine.c engine_util.c
          ARGS --tag r1 --resume-from 2 LABELS engine)
zinc_test(NAME engine_sgd_resume_np2 SOURCES test_engine_sgd.c optim_engine.c engine_util.c RANKS 2
          ARGS --tag r2 --resume-from 1 LABELS engine)
set_tests_properties(engine_sgd_np1 PROPERTIES FIXTURES_SETUP sgd_saved_np1)
set_tests_properties(engine_sgd_np2 PROPERTIES FIXTURES_SETUP sgd_saved_np2)
set_tests_properties(engine_sgd_resume_np1 PROPERTIES FIXTURES_REQUIRED sgd_saved_np2)
set_tests_properties(engine_sgd_resume_np2 PROPERTIES FIXTURES_REQUIRED sgd_saved_np1)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_sgd_cuda_emulated SOURCE test_engine_sgd.c EXTRA optim_engine.c
                     ENV ZINC_TEST_DEVICE=cuda ARGS --tag cuda)
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(engine_lion_np1 engine_lamb_np1 engine_adagrad engine_sgd_np1)
# Muon (DeepSpeed 0.19.8's MuonWithAuxAdam, issue 39): Newton-Schulz against float64, the engine at stages
# 0-3 against a float64 MuonWithAuxAdam after every step at 1, 2 and 4 ranks (the multi-rank runs assemble a
# matrix that straddles the shards on its owner; 4 ranks: five parameters over four owners), its config and
# refusals, a checkpoint resumed bitwise, the matrices' exp_avg_sq not held.
zinc_test(NAME engine_muon_np1 SOURCES test_engine_muon.c engine_util.c LABELS engine FAST)
zinc_test(NAME engine_muon_np2 SOURCES test_engine_muon.c engine_util.c RANKS 2 LABELS engine)
zinc_test(NAME engine_muon_np4 SOURCES test_engine_muon.c engine_util.c RANKS 4 LABELS engine TIMEOUT 300)
