"""A script with loops but no training: left unchanged."""

total = 0
for i in range(10):
    total += i
print(total)
