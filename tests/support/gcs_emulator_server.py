"""``python tests/support/gcs_emulator_server.py start --port N ...``: the ``gcp-storage-emulator``
server with the object generations that real GCS reports and tensorstore relies on.

The emulator stores a generation per object but leaves it out of media downloads and ignores
generation preconditions. tensorstore (orbax's OCDBT checkpoints) reads ``x-goog-generation``
from every download and updates its manifest with ``ifGenerationMatch`` uploads; without them a
checkpoint of more than a few arrays fails with "Malformed StorageGeneration". This wraps the
emulator's handlers with GCS's documented behaviour: the header on downloads, 304 for
``ifGenerationNotMatch`` equal to the current generation, 412 for an unmet ``ifGenerationMatch``
(``0``: the object must not exist). Everything else is the package's own server.
"""

from http import HTTPStatus

from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects


def _generation(request, storage) -> str:
  """The object's current generation, "0" when it does not exist (GCS's convention)."""
  name = request.params.get("object_id") or request.query.get("name", [None])[0]
  if name is None and request.query.get("uploadType") == ["multipart"]:
    name = request.data["meta"].get("name")  # a multipart upload names it in its metadata
  try:
    obj = storage.get_file_obj(request.params["bucket_name"], name)
  except (NotFound, KeyError):
    return "0"
  return str(obj.get("generation") or "0")


def _unmet(request, current: str):
  """The status a download or upload gets from its generation preconditions, or None."""
  match = request.query.get("ifGenerationMatch")
  if match and match[0] != current:
    return HTTPStatus.PRECONDITION_FAILED
  not_match = request.query.get("ifGenerationNotMatch")
  if not_match and not_match[0] == current:
    return HTTPStatus.NOT_MODIFIED
  return None


def _with_generation(handler, header: bool):
  def wrapped(request, response, storage, *args, **kwargs):
    current = _generation(request, storage)
    status = _unmet(request, current)
    if status is not None:
      response.status = status
      return None
    if header and current != "0":
      response["x-goog-generation"] = current
      response["x-goog-metageneration"] = "1"
    return handler(request, response, storage, *args, **kwargs)

  return wrapped


objects.download = _with_generation(objects.download, header=True)
objects.insert = _with_generation(objects.insert, header=False)

if __name__ == "__main__":
  from gcp_storage_emulator.__main__ import main  # the routes bind the wrapped handlers

  main()
