package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actledger/actledger/ledger"
)

// enqueueIn is fixture.enqueue for an operation of access scope scope.
func (f *fixture) enqueueIn(scope, key, params string, approval uuid.UUID) (ledger.Operation, bool, error) {
	return f.store.Enqueue(context.Background(), ledger.EnqueueRequest{
		TenantID: f.tenant, TokenID: f.agent.TokenID, Scope: scope, Action: action, Key: key,
		Provider: "acme", Params: []byte(params), ApprovalID: approval,
	})
}

// proposeIn proposes params under key as an agent of scope scope.
func (f *fixture) proposeIn(t *testing.T, scope, key, params string) (ledger.Operation, bool, error) {
	t.Helper()
	return f.store.Propose(context.Background(), ledger.ProposeRequest{
		TenantID: f.tenant, TokenID: f.agent.TokenID, Scope: scope, Action: action, Key: key,
		Provider: "acme", Params: []byte(params), RequestTTL: time.Hour,
	})
}

// approveIn is fixture.approve by an approver of scope scope.
func (f *fixture) approveIn(t *testing.T, scope, params string, maxUses int) ledger.Approval {
	t.Helper()
	a, err := f.store.CreateApproval(context.Background(), ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Scope: scope, Action: action,
		Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour), MaxUses: maxUses,
		Target: &testTarget,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEachScopeSeesItsOwnOperationsAndTheWholeTenantSeesAll: every read of
// the ledger for a caller (by id, by key, the history, its pages, the
// lists of operations and of proposals) shows a scope its own operations
// only, and another scope's exactly as a missing one (ErrNotFound); access
// to the whole tenant sees them all, those without a scope included, which
// no scope sees.
func TestEachScopeSeesItsOwnOperationsAndTheWholeTenantSeesAll(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const params = `{"sku":"A-1"}`
	shared := f.approve(t, params, 10) // an approver of the whole tenant: any scope may use it
	opOf := map[string]ledger.Operation{}
	for _, scope := range []string{"supply-eu", "supply-us", ""} {
		op, _, err := f.enqueueIn(scope, "po-"+scope, params, shared.ID)
		if err != nil {
			t.Fatal(err)
		}
		proposal, _, err := f.proposeIn(t, scope, "proposal-"+scope, params)
		if err != nil {
			t.Fatal(err)
		}
		if got := op.Scope; (scope == "") != (got == nil) || (got != nil && *got != scope) {
			t.Fatalf("operation of scope %q has scope %v", scope, got)
		}
		opOf[scope], opOf["proposal-"+scope] = op, proposal
	}
	whole := ledger.WholeTenant(f.tenant)
	eu := ledger.Access{Tenant: f.tenant, Scope: "supply-eu"}
	for _, tt := range []struct {
		name    string
		in      ledger.Access
		visible []string // the scopes whose operations it sees
	}{
		{"supply-eu", eu, []string{"supply-eu"}},
		{"supply-us", ledger.Access{Tenant: f.tenant, Scope: "supply-us"}, []string{"supply-us"}},
		{"an unknown scope", ledger.Access{Tenant: f.tenant, Scope: "legal"}, nil},
		{"the whole tenant", whole, []string{"supply-eu", "supply-us", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sees := map[string]bool{}
			for _, s := range tt.visible {
				sees[s] = true
			}
			for _, scope := range []string{"supply-eu", "supply-us", ""} {
				op := opOf[scope]
				_, getErr := f.store.Get(ctx, tt.in, op.ID)
				_, keyErr := f.store.GetByKey(ctx, tt.in, action, op.Key)
				_, eventsErr := f.store.Events(ctx, tt.in, op.ID)
				_, pageErr := f.store.EventsPage(ctx, tt.in, op.ID, 0, 10)
				for what, err := range map[string]error{"Get": getErr, "GetByKey": keyErr, "Events": eventsErr, "EventsPage": pageErr} {
					if sees[scope] && err != nil {
						t.Errorf("%s of scope %q's operation: %v, want it", what, scope, err)
					}
					if !sees[scope] && !errors.Is(err, ledger.ErrNotFound) {
						t.Errorf("%s of scope %q's operation: %v, want ErrNotFound", what, scope, err)
					}
				}
			}
			page, err := f.store.OperationsPage(ctx, tt.in, ledger.OperationsFilter{}, nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			ops := page.Operations
			if got, want := scopesOf(ops), 2*len(tt.visible); len(got) != want || !onlyScopes(got, sees) {
				t.Errorf("OperationsPage lists scopes %v, want the operation and the proposal of each of %q", got, tt.visible)
			}
			awaiting, err := f.store.AwaitingPage(ctx, tt.in, nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			var proposals []ledger.Operation
			for _, r := range awaiting {
				proposals = append(proposals, r.Operation)
			}
			if got := scopesOf(proposals); len(got) != len(tt.visible) || !onlyScopes(got, sees) {
				t.Errorf("AwaitingPage lists scopes %v, want one proposal of each of %q", got, tt.visible)
			}
		})
	}

	// Deciding is acting: another scope's proposal is not found, and stays
	// as it was; the scope's own is decided, its approval taking its scope.
	us := opOf["proposal-supply-us"]
	decide := func(ledger.Operation) ledger.Decision {
		return ledger.Decision{ApproverTokenID: f.approver.TokenID, Approver: "approver:eu", Fingerprint: us.ParamsFingerprint, TTL: time.Hour, Target: &testTarget}
	}
	if _, _, err := f.store.Approve(ctx, eu, us.ID, decide); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("supply-eu approves supply-us's proposal: %v, want ErrNotFound", err)
	}
	if _, err := f.store.Deny(ctx, eu, us.ID, "approver:eu", "no"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("supply-eu denies supply-us's proposal: %v, want ErrNotFound", err)
	}
	if got, _ := f.store.Get(ctx, whole, us.ID); got.Status != ledger.StatusAwaitingApproval || got.Version != us.Version {
		t.Errorf("supply-us's proposal is %s v%d after supply-eu's decisions, want unchanged", got.Status, got.Version)
	}
	_, approval, err := f.store.Approve(ctx, whole, us.ID, decide)
	if err != nil {
		t.Fatal(err)
	}
	if approval.Scope == nil || *approval.Scope != "supply-us" {
		t.Errorf("the approval of supply-us's proposal has scope %v, want the proposal's", approval.Scope)
	}
}

func scopesOf(ops []ledger.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		if op.Scope != nil {
			out[i] = *op.Scope
		}
	}
	return out
}

func onlyScopes(got []string, allowed map[string]bool) bool {
	for _, s := range got {
		if !allowed[s] {
			return false
		}
	}
	return true
}

// TestAKeyAnotherScopeHoldsIsInUseElsewhereAndLearnsNothing: keys are
// unique per tenant, so a second scope's request for a key the first holds
// creates nothing; it is ErrKeyInUseElsewhere, which names no operation,
// with the same params (no replay of another scope's operation), other
// params (no conflict naming it) or as a proposal, and the first
// operation's history does not hear of it. In its own scope the key keeps
// today's answers, and so does access to the whole tenant.
func TestAKeyAnotherScopeHoldsIsInUseElsewhereAndLearnsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const params, other = `{"sku":"A-1"}`, `{"sku":"B-2"}`
	approval := f.approve(t, params, 10)
	otherApproval := f.approve(t, other, 10)
	held, _, err := f.enqueueIn("supply-eu", "po-37", params, approval.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		try  func() (ledger.Operation, bool, error)
	}{
		{"the same params", func() (ledger.Operation, bool, error) { return f.enqueueIn("supply-us", "po-37", params, approval.ID) }},
		{"other params", func() (ledger.Operation, bool, error) {
			return f.enqueueIn("supply-us", "po-37", other, otherApproval.ID)
		}},
		{"a proposal", func() (ledger.Operation, bool, error) { return f.proposeIn(t, "supply-us", "po-37", params) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			op, replayed, err := tt.try()
			var conflict *ledger.KeyConflictError
			if !errors.Is(err, ledger.ErrKeyInUseElsewhere) || errors.As(err, &conflict) || replayed || op.ID != uuid.Nil {
				t.Errorf("supply-us asks for supply-eu's key: %+v, replayed %v, %v; want ErrKeyInUseElsewhere and no operation", op, replayed, err)
			}
		})
	}
	if events, _ := f.store.Events(ctx, ledger.WholeTenant(f.tenant), held.ID); len(events) != 1 {
		t.Errorf("supply-eu's operation has %d events after the other scope's requests, want only its created event", len(events))
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, approval.ID); n != 1 {
		t.Errorf("approval uses = %d, want 1: a refused request uses nothing", n)
	}

	// Its own scope: a replay, and a conflict naming the operation.
	if op, replayed, err := f.enqueueIn("supply-eu", "po-37", params, approval.ID); err != nil || !replayed || op.ID != held.ID {
		t.Errorf("supply-eu again: %v, replayed %v, %v; want a replay of %s", op.ID, replayed, err, held.ID)
	}
	var conflict *ledger.KeyConflictError
	if _, _, err := f.enqueueIn("supply-eu", "po-37", other, otherApproval.ID); !errors.As(err, &conflict) || conflict.Existing.ID != held.ID {
		t.Errorf("supply-eu with other params: %v, want a conflict naming %s", err, held.ID)
	}
	// The whole tenant sees every scope: today's answers.
	if op, replayed, err := f.enqueueIn("", "po-37", params, approval.ID); err != nil || !replayed || op.ID != held.ID {
		t.Errorf("the whole tenant: %v, replayed %v, %v; want a replay of %s", op.ID, replayed, err, held.ID)
	}
	if taken, err := f.store.KeyTaken(ctx, f.tenant, action, "po-37"); err != nil || !taken {
		t.Errorf("KeyTaken = %v, %v; want true: the key is the tenant's", taken, err)
	}
}

// TestAnApprovalAuthorisesOnlyTheScopeOfItsApprover: an approval granted
// by an approver of a scope authorises operations of that scope only;
// another scope's request under it is refused as a missing approval is
// (nothing is used), and another scope cannot revoke it (not found). An
// approval of the whole tenant serves every scope.
func TestAnApprovalAuthorisesOnlyTheScopeOfItsApprover(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const params = `{"sku":"A-1"}`
	eu := f.approveIn(t, "supply-eu", params, 10)
	if eu.Scope == nil || *eu.Scope != "supply-eu" {
		t.Fatalf("approval scope = %v, want supply-eu", eu.Scope)
	}
	var refused *ledger.ApprovalError
	for _, scope := range []string{"supply-us", ""} {
		if _, _, err := f.enqueueIn(scope, "po-"+scope, params, eu.ID); !errors.As(err, &refused) || refused.Code != ledger.ApprovalMismatch || refused.Reason != "no such approval" {
			t.Errorf("scope %q under supply-eu's approval: %v, want approval_mismatch: no such approval", scope, err)
		}
	}
	if _, _, err := f.enqueueIn("supply-eu", "po-eu", params, eu.ID); err != nil {
		t.Errorf("supply-eu under its own approval: %v", err)
	}
	if _, _, err := f.enqueueIn("supply-us", "po-us", params, f.approve(t, params, 1).ID); err != nil {
		t.Errorf("supply-us under an approval of the whole tenant: %v", err)
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, eu.ID); n != 1 {
		t.Errorf("supply-eu's approval uses = %d, want 1", n)
	}
	if _, _, err := f.store.RevokeApproval(ctx, ledger.Access{Tenant: f.tenant, Scope: "supply-us"}, eu.ID, "approver:us"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("supply-us revokes supply-eu's approval: %v, want ErrNotFound", err)
	}
	if _, _, err := f.store.RevokeApproval(ctx, ledger.Access{Tenant: f.tenant, Scope: "supply-eu"}, eu.ID, "approver:eu"); err != nil {
		t.Errorf("supply-eu revokes its approval: %v", err)
	}
}

// TestGroupedEnqueuesRefuseAnApprovalOfAnotherScope: enqueue_operations,
// which writes a group of concurrent enqueues in one statement, takes only
// the case where every one would be created alone: an approval of one
// scope under an operation of another makes the whole group fall back to
// one by one (SQLSTATE ALSET), where enqueue_operation refuses that one.
func TestGroupedEnqueuesRefuseAnApprovalOfAnotherScope(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const params = `{"sku":"A-1"}`
	eu := f.approveIn(t, "supply-eu", params, 10)
	_, fingerprint, err := ledger.Canonicalize([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	group := func(scopes ...string) error {
		n := len(scopes)
		ids, tenants, approvals, tokens := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n)
		actions, keys, providers, fingerprints, externals := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		actors, subjects, msgIDs, payloads, paramsOf := make([]string, n), make([]string, n), make([]string, n), make([][]byte, n), make([][]byte, n)
		for i, scope := range scopes {
			ids[i] = uuid.Must(uuid.NewV7())
			tenants[i], approvals[i], tokens[i] = f.tenant, eu.ID, f.agent.TokenID
			actions[i], keys[i], providers[i], fingerprints[i], externals[i] = action, ids[i].String(), "acme", fingerprint, ledger.ExternalKeyOfID(ids[i])
			actors[i], subjects[i], msgIDs[i], payloads[i], paramsOf[i] = "agent:"+scope, "TEST.ops.acme", "dispatch."+ids[i].String()+".1", []byte(`{}`), []byte(params)
		}
		rows, _ := f.pool.Query(ctx, `SELECT ord FROM enqueue_operations(
    p_id => @id, p_tenant => @tenant, p_action => @action, p_key => @key, p_provider => @provider,
    p_params => @params, p_fingerprint => @fingerprint, p_approval => @approval, p_token => @token,
    p_external_key => @external_key, p_now => NULL, p_actor => @actor,
    p_subject => @subject, p_msg_id => @msg_id, p_payload => @payload, p_client_key => NULL, p_scope => @scope)`,
			pgx.StrictNamedArgs{"id": ids, "tenant": tenants, "action": actions, "key": keys, "provider": providers,
				"params": paramsOf, "fingerprint": fingerprints, "approval": approvals, "token": tokens,
				"external_key": externals, "actor": actors, "subject": subjects, "msg_id": msgIDs, "payload": payloads, "scope": scopes})
		_, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}
	var pgErr *pgconn.PgError
	if err := group("supply-eu", "supply-us"); !errors.As(err, &pgErr) || pgErr.Code != "ALSET" {
		t.Errorf("a group with another scope's operation under supply-eu's approval: %v, want SQLSTATE ALSET", err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Errorf("%d operations after the refused group, want none", n)
	}
	if err := group("supply-eu", "supply-eu"); err != nil {
		t.Errorf("a group of supply-eu's operations under its approval: %v", err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE scope = 'supply-eu'`); n != 2 {
		t.Errorf("%d operations of supply-eu, want 2", n)
	}
}

// TestOnlyTheWholeTenantPausesAndResumes: a pause holds every scope's
// work, so a caller with a scope may neither pause nor resume
// (ErrWholeTenantOnly) and nothing changes; the pauses of the tenant are
// still listed to it, since they hold its work too.
func TestOnlyTheWholeTenantPausesAndResumes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	eu := ledger.Access{Tenant: f.tenant, Scope: "supply-eu"}
	if err := f.store.PauseDispatch(ctx, eu, "acme", "", "operator:eu"); !errors.Is(err, ledger.ErrWholeTenantOnly) {
		t.Errorf("a scope pauses: %v, want ErrWholeTenantOnly", err)
	}
	if err := f.store.PauseDispatch(ctx, ledger.WholeTenant(f.tenant), "acme", "", "operator:all"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.store.ResumeDispatch(ctx, eu, "", ""); !errors.Is(err, ledger.ErrWholeTenantOnly) {
		t.Errorf("a scope resumes: %v, want ErrWholeTenantOnly", err)
	}
	if pauses, err := f.store.Pauses(ctx, f.tenant); err != nil || len(pauses) != 1 || pauses[0].PausedBy != "operator:all" {
		t.Errorf("pauses = %v, %v; want the one of the whole tenant, still there", pauses, err)
	}
}
