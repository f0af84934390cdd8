-- durable 013: reserved for the lead's migration of lost attempts (013_lost),
-- written on another branch; this placeholder only keeps the numbering
-- contiguous on the leader branch. Take the other branch's file on merge.
SELECT 1;
