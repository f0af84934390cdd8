ALTER TABLE {{schema}}.schedules DROP COLUMN declared, DROP COLUMN declared_paused;
DROP TABLE {{schema}}.leader;
