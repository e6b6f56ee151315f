CREATE FUNCTION public.onejob_first_attempt_reserved(reserved boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF NOT reserved THEN
    RAISE EXCEPTION 'budget_exceeded: the first attempt could not be reserved within the owner''s spend limit' USING ERRCODE = 'OJ429';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION public.onejob_job_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_notify('onejob_job', json_build_array(NEW.owner_id, NEW.id, NEW.state)::text);
  RETURN NULL;
END
$$;

CREATE FUNCTION public.onejob_spend_reserve() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  d text := to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
  m text := to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-01');
BEGIN
  INSERT INTO spend_windows (owner_id, period, starts_on) VALUES (NEW.owner_id, 'day', d), (NEW.owner_id, 'month', m)
    ON CONFLICT DO NOTHING;
  -- Day first, then month: every writer locks an owner's two rows in this order.
  UPDATE spend_windows SET reserved_micros = reserved_micros + NEW.reserve_micros
    WHERE owner_id = NEW.owner_id AND period = 'day' AND starts_on = d
      AND (NEW.spend_limit_day_micros IS NULL OR spent_micros + reserved_micros + NEW.reserve_micros <= NEW.spend_limit_day_micros);
  IF NOT FOUND THEN RETURN NULL; END IF;
  UPDATE spend_windows SET reserved_micros = reserved_micros + NEW.reserve_micros
    WHERE owner_id = NEW.owner_id AND period = 'month' AND starts_on = m
      AND (NEW.spend_limit_month_micros IS NULL OR spent_micros + reserved_micros + NEW.reserve_micros <= NEW.spend_limit_month_micros);
  IF NOT FOUND THEN
    UPDATE spend_windows SET reserved_micros = reserved_micros - NEW.reserve_micros
      WHERE owner_id = NEW.owner_id AND period = 'day' AND starts_on = d;
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$;

CREATE FUNCTION public.onejob_spend_settle() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  held_old bigint := CASE WHEN OLD.state IN ('starting', 'running', 'unknown') THEN OLD.reserve_micros ELSE 0 END;
  held_new bigint := CASE WHEN TG_OP = 'UPDATE' AND NEW.state IN ('starting', 'running', 'unknown') THEN NEW.reserve_micros ELSE 0 END;
  dr bigint := held_new - held_old;
  ds bigint := CASE WHEN TG_OP = 'UPDATE' THEN COALESCE(NEW.cost_micros, 0) - COALESCE(OLD.cost_micros, 0) ELSE 0 END;
BEGIN
  IF dr <> 0 OR ds <> 0 THEN
    UPDATE spend_windows SET reserved_micros = reserved_micros + dr, spent_micros = spent_micros + ds
      WHERE owner_id = OLD.owner_id AND period = 'day' AND starts_on = to_char(OLD.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
    UPDATE spend_windows SET reserved_micros = reserved_micros + dr, spent_micros = spent_micros + ds
      WHERE owner_id = OLD.owner_id AND period = 'month' AND starts_on = to_char(OLD.started_at AT TIME ZONE 'UTC', 'YYYY-MM-01');
  END IF;
  RETURN NULL;
END $$;

CREATE TABLE public.attempts (
    owner_id text NOT NULL,
    id text NOT NULL,
    job_id text NOT NULL,
    number integer NOT NULL,
    provider text NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    base_version bigint NOT NULL,
    started_at timestamp with time zone NOT NULL,
    deadline_at timestamp with time zone,
    finished_at timestamp with time zone,
    error json,
    lease_owner text,
    lease_token text,
    lease_expires_at timestamp with time zone,
    prompt_tokens bigint,
    completion_tokens bigint,
    total_tokens bigint,
    cost_micros bigint,
    provider_request_id text,
    resolved_by text,
    unknown_at timestamp with time zone,
    lookup_next_at timestamp with time zone,
    lookup_last_at timestamp with time zone,
    lookup_count integer DEFAULT 0 NOT NULL,
    lookup_holder text,
    lookup_lease_expires_at timestamp with time zone,
    reserve_micros bigint,
    spend_limit_day_micros bigint,
    spend_limit_month_micros bigint,
    CONSTRAINT attempts_completion_tokens_check CHECK ((completion_tokens >= 0)),
    CONSTRAINT attempts_cost_micros_check CHECK ((cost_micros >= 0)),
    CONSTRAINT attempts_cost_needs_usage CHECK (((cost_micros IS NULL) OR (prompt_tokens IS NOT NULL))),
    CONSTRAINT attempts_finished_iff_terminal CHECK (((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text, 'superseded'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT attempts_kind_check CHECK ((kind = ANY (ARRAY['first'::text, 'failover'::text, 'hedge'::text, 'manual'::text]))),
    CONSTRAINT attempts_lease_complete CHECK (((lease_owner IS NULL) = (lease_expires_at IS NULL))),
    CONSTRAINT attempts_lookup_count_check CHECK ((lookup_count >= 0)),
    CONSTRAINT attempts_lookup_lease_complete CHECK (((lookup_holder IS NULL) = (lookup_lease_expires_at IS NULL))),
    CONSTRAINT attempts_number_check CHECK ((number >= 1)),
    CONSTRAINT attempts_prompt_tokens_check CHECK ((prompt_tokens >= 0)),
    CONSTRAINT attempts_reserve_micros_check CHECK ((reserve_micros >= 0)),
    CONSTRAINT attempts_resolved_by_check CHECK ((resolved_by = ANY (ARRAY['lookup'::text, 'callback'::text, 'policy'::text, 'late_answer'::text, 'operator'::text]))),
    CONSTRAINT attempts_running_has_lease CHECK (((state <> 'running'::text) OR (lease_owner IS NOT NULL))),
    CONSTRAINT attempts_spend_limit_day_micros_check CHECK ((spend_limit_day_micros >= 0)),
    CONSTRAINT attempts_spend_limit_month_micros_check CHECK ((spend_limit_month_micros >= 0)),
    CONSTRAINT attempts_state_check CHECK ((state = ANY (ARRAY['starting'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text, 'unknown'::text, 'superseded'::text]))),
    CONSTRAINT attempts_total_tokens_check CHECK ((total_tokens >= 0)),
    CONSTRAINT attempts_usage_complete CHECK ((((prompt_tokens IS NULL) = (completion_tokens IS NULL)) AND ((prompt_tokens IS NULL) = (total_tokens IS NULL))))
);

CREATE TABLE public.batch_lines (
    owner_id text NOT NULL,
    batch_id text NOT NULL,
    line_no integer NOT NULL,
    custom_id text NOT NULL,
    job_id text,
    outcome text,
    output text,
    CONSTRAINT batch_lines_outcome_check CHECK ((outcome = ANY (ARRAY['output'::text, 'error'::text]))),
    CONSTRAINT batch_lines_output_iff_outcome CHECK (((outcome IS NULL) = (output IS NULL)))
);

CREATE TABLE public.batches (
    owner_id text NOT NULL,
    id text NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint text NOT NULL,
    input_file_id text NOT NULL,
    endpoint text NOT NULL,
    completion_window text NOT NULL,
    metadata json,
    status text NOT NULL,
    line_count integer NOT NULL,
    lines_created integer DEFAULT 0 NOT NULL,
    output_file_id text,
    error_file_id text,
    errors json,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    in_progress_at timestamp with time zone,
    finalizing_at timestamp with time zone,
    completed_at timestamp with time zone,
    failed_at timestamp with time zone,
    expired_at timestamp with time zone,
    cancelling_at timestamp with time zone,
    cancelled_at timestamp with time zone,
    finished_at timestamp with time zone,
    CONSTRAINT batches_finished_iff_terminal CHECK (((status = ANY (ARRAY['completed'::text, 'cancelled'::text, 'expired'::text, 'failed'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT batches_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 255))),
    CONSTRAINT batches_status_check CHECK ((status = ANY (ARRAY['validating'::text, 'in_progress'::text, 'finalizing'::text, 'completed'::text, 'cancelling'::text, 'cancelled'::text, 'expired'::text, 'failed'::text])))
);

CREATE TABLE public.callback_signatures (
    signature text NOT NULL,
    attempt_id text NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE public.certifications (
    provider text NOT NULL,
    model text NOT NULL,
    contract_fingerprint text NOT NULL,
    route text,
    passed boolean NOT NULL,
    report json NOT NULL,
    verified_at timestamp with time zone NOT NULL,
    CONSTRAINT certifications_contract_fingerprint_check CHECK ((contract_fingerprint ~~ 'sha256:%'::text))
);

CREATE TABLE public.file_lines (
    owner_id text NOT NULL,
    file_id text NOT NULL,
    line_no integer NOT NULL,
    custom_id text NOT NULL,
    url text NOT NULL,
    route text NOT NULL,
    line text NOT NULL,
    CONSTRAINT file_lines_line_no_check CHECK ((line_no >= 1))
);

CREATE TABLE public.files (
    owner_id text NOT NULL,
    id text NOT NULL,
    purpose text NOT NULL,
    filename text NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    line_count integer DEFAULT 0 NOT NULL,
    endpoints json DEFAULT '[]'::json NOT NULL,
    status text NOT NULL,
    batch_id text,
    kind text DEFAULT 'upload'::text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT files_kind_check CHECK ((kind = ANY (ARRAY['upload'::text, 'output'::text, 'error'::text]))),
    CONSTRAINT files_purpose_check CHECK ((purpose = ANY (ARRAY['batch'::text, 'batch_output'::text]))),
    CONSTRAINT files_status_check CHECK ((status = ANY (ARRAY['uploading'::text, 'processed'::text])))
);

CREATE TABLE public.job_events (
    owner_id text NOT NULL,
    id bigint NOT NULL,
    job_id text NOT NULL,
    attempt_id text,
    type text NOT NULL,
    data json DEFAULT '{}'::json NOT NULL,
    at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.job_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.job_events_id_seq OWNED BY public.job_events.id;

CREATE TABLE public.jobs (
    owner_id text NOT NULL,
    id text NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint text NOT NULL,
    route text NOT NULL,
    input json NOT NULL,
    metadata json,
    providers json NOT NULL,
    state text NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    attempt_count integer DEFAULT 0 NOT NULL,
    completed_by text,
    result json,
    error json,
    skipped json DEFAULT '[]'::json NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    stream_attempt_id text,
    trace_context text,
    keyless_fingerprint text,
    batch_id text,
    CONSTRAINT jobs_finished_iff_terminal CHECK (((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT jobs_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 255))),
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'unknown'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT jobs_winner_only_when_succeeded CHECK (((completed_by IS NOT NULL) = (state = 'succeeded'::text)))
);

CREATE TABLE public.maintenance_leases (
    name text NOT NULL,
    holder text NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE public.onejob_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.spend_windows (
    owner_id text NOT NULL,
    period text NOT NULL,
    starts_on text NOT NULL,
    spent_micros bigint DEFAULT 0 NOT NULL,
    reserved_micros bigint DEFAULT 0 NOT NULL,
    CONSTRAINT spend_windows_period_check CHECK ((period = ANY (ARRAY['day'::text, 'month'::text])))
);

CREATE TABLE public.stream_events (
    owner_id text NOT NULL,
    job_id text NOT NULL,
    attempt_number integer NOT NULL,
    seq integer NOT NULL,
    events text NOT NULL
);

ALTER TABLE ONLY public.job_events ALTER COLUMN id SET DEFAULT nextval('public.job_events_id_seq'::regclass);

ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_job_number_unique UNIQUE (owner_id, job_id, number);

ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (owner_id, id);

ALTER TABLE ONLY public.batch_lines
    ADD CONSTRAINT batch_lines_pkey PRIMARY KEY (owner_id, batch_id, line_no);

ALTER TABLE ONLY public.batches
    ADD CONSTRAINT batches_owner_key_unique UNIQUE (owner_id, idempotency_key);

ALTER TABLE ONLY public.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (owner_id, id);

ALTER TABLE ONLY public.callback_signatures
    ADD CONSTRAINT callback_signatures_pkey PRIMARY KEY (signature);

ALTER TABLE ONLY public.certifications
    ADD CONSTRAINT certifications_pkey PRIMARY KEY (provider, model, contract_fingerprint);

ALTER TABLE ONLY public.file_lines
    ADD CONSTRAINT file_lines_pkey PRIMARY KEY (owner_id, file_id, line_no);

ALTER TABLE ONLY public.files
    ADD CONSTRAINT files_pkey PRIMARY KEY (owner_id, id);

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_pkey PRIMARY KEY (owner_id, id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_owner_key_unique UNIQUE (owner_id, idempotency_key);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (owner_id, id);

ALTER TABLE ONLY public.maintenance_leases
    ADD CONSTRAINT maintenance_leases_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.onejob_migrations
    ADD CONSTRAINT onejob_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.spend_windows
    ADD CONSTRAINT spend_windows_pkey PRIMARY KEY (owner_id, period, starts_on);

ALTER TABLE ONLY public.stream_events
    ADD CONSTRAINT stream_events_pkey PRIMARY KEY (owner_id, job_id, attempt_number, seq);

CREATE INDEX attempts_claimable_idx ON public.attempts USING btree (started_at) WHERE ((state = 'starting'::text) AND (lease_owner IS NULL));

CREATE INDEX attempts_leased_idx ON public.attempts USING btree (lease_expires_at) WHERE (lease_owner IS NOT NULL);

CREATE INDEX attempts_orphan_idx ON public.attempts USING btree (started_at) WHERE ((state = 'running'::text) AND (lease_owner IS NULL));

CREATE INDEX attempts_owner_active_idx ON public.attempts USING btree (owner_id) WHERE (state = ANY (ARRAY['starting'::text, 'running'::text]));

CREATE INDEX attempts_owner_started_idx ON public.attempts USING btree (owner_id, started_at);

CREATE INDEX attempts_unknown_idx ON public.attempts USING btree (started_at) WHERE (state = 'unknown'::text);

CREATE INDEX batch_lines_pending_idx ON public.batch_lines USING btree (owner_id, batch_id, line_no) WHERE (outcome IS NULL);

CREATE INDEX batches_finished_idx ON public.batches USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX batches_open_idx ON public.batches USING btree (created_at) WHERE (finished_at IS NULL);

CREATE INDEX batches_owner_created_idx ON public.batches USING btree (owner_id, created_at DESC, id DESC);

CREATE INDEX callback_signatures_expiry_idx ON public.callback_signatures USING btree (expires_at);

CREATE INDEX files_uploading_idx ON public.files USING btree (created_at) WHERE (status = 'uploading'::text);

CREATE INDEX job_events_id_idx ON public.job_events USING btree (id);

CREATE INDEX job_events_job_idx ON public.job_events USING btree (owner_id, job_id, id);

CREATE INDEX jobs_batch_idx ON public.jobs USING btree (owner_id, batch_id) WHERE (batch_id IS NOT NULL);

CREATE INDEX jobs_batch_queued_idx ON public.jobs USING btree (created_at, id) WHERE ((state = 'queued'::text) AND (batch_id IS NOT NULL));

CREATE INDEX jobs_finished_idx ON public.jobs USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE UNIQUE INDEX jobs_keyless_active_unique ON public.jobs USING btree (owner_id, keyless_fingerprint) WHERE ((keyless_fingerprint IS NOT NULL) AND (state <> ALL (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])));

CREATE INDEX jobs_keyless_idx ON public.jobs USING btree (owner_id, keyless_fingerprint, finished_at DESC) WHERE (keyless_fingerprint IS NOT NULL);

CREATE INDEX jobs_owner_created_idx ON public.jobs USING btree (owner_id, created_at DESC, id DESC);

CREATE INDEX jobs_queued_idx ON public.jobs USING btree (created_at) WHERE ((state = 'queued'::text) AND (batch_id IS NULL));

CREATE TRIGGER attempts_spend_release AFTER DELETE ON public.attempts FOR EACH ROW WHEN (((old.reserve_micros IS NOT NULL) AND (old.state = ANY (ARRAY['starting'::text, 'running'::text, 'unknown'::text])))) EXECUTE FUNCTION public.onejob_spend_settle();

CREATE TRIGGER attempts_spend_reserve BEFORE INSERT ON public.attempts FOR EACH ROW WHEN ((new.reserve_micros IS NOT NULL)) EXECUTE FUNCTION public.onejob_spend_reserve();

CREATE TRIGGER attempts_spend_settle AFTER UPDATE OF state, cost_micros ON public.attempts FOR EACH ROW WHEN ((old.reserve_micros IS NOT NULL)) EXECUTE FUNCTION public.onejob_spend_settle();

CREATE TRIGGER jobs_state_notify AFTER UPDATE OF state ON public.jobs FOR EACH ROW WHEN ((old.state IS DISTINCT FROM new.state)) EXECUTE FUNCTION public.onejob_job_notify();

ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_job_fk FOREIGN KEY (owner_id, job_id) REFERENCES public.jobs(owner_id, id);
