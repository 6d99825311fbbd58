"""The workings behind ``conveyor.app.Conveyor``: each module one duty of the app, the façade a list
of entry points that delegate here. Used by ``conveyor.app`` only (and by tests reaching inside)."""
