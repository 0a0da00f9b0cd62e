UPDATE runs SET pid = :pid, proc_start = :proc_start WHERE id = :run AND host_id = :host AND status = 'running'
