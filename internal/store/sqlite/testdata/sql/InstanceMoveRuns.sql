UPDATE runs SET host_id = :by WHERE host_id = :dead AND status = 'running' AND managed = 1
