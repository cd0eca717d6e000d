//! `ragctx documents list|delete`: what the store holds, and removing whole documents.

use anyhow::{bail, Result};
use ragctx_core::{DocumentId, VectorStore};

/// Prints every document (id, chunks, title), or one JSON array with `json`.
pub fn list(store: &dyn VectorStore, json: bool) -> Result<()> {
    let docs = store.documents()?;
    if json {
        println!("{}", serde_json::to_string(&docs)?);
        return Ok(());
    }
    for d in &docs {
        println!("{}\t{} chunks\t{}", d.document_id, d.chunks, d.title);
    }
    eprintln!("{} documents, {} chunks", docs.len(), docs.iter().map(|d| d.chunks).sum::<usize>());
    Ok(())
}

/// Deletes each document with all its chunks (one write each). Sessions that showed them
/// keep their history; no later turn can show them. Unknown ids are named at the end and
/// make the command fail as "not found" after the others are deleted.
pub fn delete(store: &dyn VectorStore, ids: &[String]) -> Result<()> {
    let mut unknown = Vec::new();
    for id in ids {
        if id.is_empty() {
            bail!(ragctx_core::Error::InvalidInput("a document id is empty".into()));
        }
        let removed = store.replace_documents(&[DocumentId::from(id.as_str())], &[])?.removed;
        if removed == 0 {
            unknown.push(id.as_str());
        } else {
            println!("deleted {id} ({removed} chunks)");
        }
    }
    if !unknown.is_empty() {
        bail!(ragctx_core::Error::NotFound(format!("no document {}", unknown.join(", "))));
    }
    Ok(())
}
