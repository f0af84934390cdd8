DROP TABLE {{schema}}.schedules;
