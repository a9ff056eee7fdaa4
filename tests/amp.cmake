# Loss scaling (amp/): the dynamic scaler against DeepSpeed's DynamicLossScaler.update_scale, step by step.
zinc_test(NAME amp_loss_scaler SOURCES test_loss_scaler.c LABELS amp unit)
