package sqlite

import (
	"context"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// commentInsert writes, in the transaction t, a comment by a with body on
// the issue issueID of company companyID and its issue.commented row
// (store.CommentInsert), and returns the comment.
func (t *wtx) commentInsert(ctx context.Context, issueID, companyID, body string, a store.Actor) (*clasp.Comment, error) {
	c, err := store.CommentInsert(ctx, writer{t}, store.CommentArgs(t.s.newID(), issueID, "", companyID, body, a), a)
	if err != nil {
		return nil, wrap(err, "comment on issue %s", issueID)
	}
	return c, nil
}
