-- $1 = @agent
SELECT adapter_config FROM agents WHERE id = $1::text
