ALTER TABLE issues ADD CONSTRAINT issues_l7
	CHECK (checkout_run_id IS NULL OR (status = 'in_progress' AND execution_run_id = checkout_run_id)) NOT VALID
