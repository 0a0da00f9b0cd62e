SELECT adapter_config FROM agents WHERE id = :agent
