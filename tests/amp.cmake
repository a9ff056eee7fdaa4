# Loss scaling (amp/): the dynamic scaler against DeepSpeed's DynamicLossScaler.update_scale, step by step.
zinc_test(NAME amp_loss_scaler SOURCES test_loss_scaler.c LABELS amp unit)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(amp_loss_scaler)
