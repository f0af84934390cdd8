DROP TABLE {{schema}}.leader;
